"""``njit`` for varvedb's kernels: numba's, with a disk cache that loads lighter.

Why: before numba loads any cached function it calls the target context's
``refresh()``, which imports and registers every typing and lowering module
numba has (numpy, typed containers, random, linalg, ...): about 60-100 ms the
first time in a process, and in a fresh process that was most of the time to
the first search. Loading machine code needs none of it: only the runtime's
helper functions (NRT), whose symbols the cached object code links against.
So :class:`LoadOnlyCache` initialises just the runtime and loads; a kernel that
has to be compiled still goes through numba's compiler, which refreshes the
context itself. If a lighter load fails for any reason (a kernel that links a
symbol only a registry module installs), it falls back to numba's own path.

Functions marked ``inline="always"`` are never compiled on their own (their
IR is copied into each caller), so they get no cache: a cache costs a
directory probe and a temporary file per function at import.
"""
from __future__ import annotations

from numba import njit as _numba_njit
from numba.core.caching import FunctionCache

# numba's private entry points this relies on; without them, plain caching
_LIGHT = all(hasattr(FunctionCache, name)
             for name in ("_load_overload", "_guard_against_spurious_io_errors"))


class LoadOnlyCache(FunctionCache):
    """numba's per-function disk cache, loading without the context refresh."""

    def load_overload(self, sig, target_context):
        from numba.core.runtime import rtsys
        try:
            rtsys.initialize(target_context)
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)
        except Exception:
            return super().load_overload(sig, target_context)


def njit(**options):
    """``numba.njit(**options)`` with :class:`LoadOnlyCache` for ``cache=True``."""
    cache = options.pop("cache", False)
    if options.get("inline", "never") != "never":
        cache = False

    def wrap(fn):
        dispatcher = _numba_njit(cache=cache and not _LIGHT, **options)(fn)
        if cache and _LIGHT:
            dispatcher._cache = LoadOnlyCache(fn)
        return dispatcher

    return wrap
