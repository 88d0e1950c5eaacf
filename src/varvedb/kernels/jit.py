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

numba specialises on each array's writability: a mapped (read-only) arena and
an in-memory one compiled the same kernel twice, and with a read-only or
writable mask too, up to four times (195 specialisations where 71 differ in
more than that, and most of a fresh test run's time). So the inputs
a kernel only reads, :data:`READ_ONLY` by name plus any it names in
``readonly=`` (a tuple named there: each array in it), are compiled as
read-only arrays whatever the caller passes: a
writable array converts to that type at no cost, so one specialisation serves
both (dispatching to it by the caller's exact types too), and a kernel that
writes one of them fails to compile.

A constant argument reaches a kernel as a literal type (``Literal[int](0)``),
and while numba infers a caller's loop-carried variable it compiles the
callee once for the literal start value and again for the loop's type: both
are compiled as the plain type instead, unless the kernel names the argument
in ``literal=`` (the walk's ``level == 0`` pruned at compile time).

The cache is keyed on the source of every module in this package, not only
the kernel's own file: a kernel's machine code holds the inlined helpers and
constants of the modules it imports, so a change to any of them must miss.

Each data file (.nbc: the pickled machine code of one specialisation) carries
a SHA-256 of its name and its bytes, written with them and checked before they
are unpickled (:func:`_save_checked`, :func:`_load_checked`): a file damaged on
disk — a flipped byte of machine code unpickles as well as a sound one, and
would run — is a miss, compiled again and written over, as a file of another
format (numba's own, without the digest) is, and so is a sound file under
another entry's name (two of a kernel's files swapped: its code for float64
arrays loaded for float32 ones failed every later call, never compiled again).
The index (.nbi) holds only keys and file names, which numba checks itself
(its version, the stamp).
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import os
import pickle
import threading
from pathlib import Path

import numpy as np
from numba import njit as _numba_njit
from numba._dispatcher import compute_fingerprint
from numba.core import types
from numba.core.caching import FunctionCache
from numba.core.compiler_lock import global_compiler_lock
from numba.core.typing.typeof import Purpose, typeof
from numba.np.numpy_support import from_dtype, map_layout

from . import compile_lock, runtime
from . import compile_log  # noqa: F401  (its listener counts every compilation from here on)

# parameters that, in every kernel that has them, are only read, and that reach
# the kernels they call as themselves. Not `query` (the build passes its reused
# row buffer under that name), not `queries` (its rows are a single search's
# `query`: two flavours of the distance kernels, under fastmath, rounded a
# batch search's distances 1 ulp apart from a single one's), and not the
# graph's link arrays (typed read-only in the build's kernels, a cold-compiled
# process built graphs of lower recall from its second build on; not understood
# yet): the search kernels and the walks, which never write them, name them in
# ``readonly=``.
READ_ONLY = frozenset({"arena", "norms", "allow"})

# numba's private entry points the light load relies on; without them, numba's load
_LIGHT = all(hasattr(FunctionCache, name)
             for name in ("_load_overload", "_guard_against_spurious_io_errors"))


@functools.cache
def source_stamp(package: Path = Path(__file__).parent) -> str:
    """A hash over the source of every module of ``package`` (this one: kernels/*.py)."""
    digest = hashlib.sha256()
    for path in sorted(package.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


class LoadOnlyCache(FunctionCache):
    """numba's per-function disk cache, loading without the context refresh, and
    stale when any module of this package changed (:func:`source_stamp`)."""

    def __init__(self, py_func):
        super().__init__(py_func)
        # numba's stamp is the kernel's own file's mtime and size; an index
        # whose stamp differs is read as empty and rewritten on the next save
        self._cache_file._source_stamp = source_stamp()
        # one process at a time writes this kernel's index and data files
        # (compile_lock.saving says why); the machine code is made before, unlocked
        lock = os.path.join(self._cache_path, f"varvedb-saving-{py_func.__module__}."
                                              f"{py_func.__qualname__}")
        self._cache_file.save = functools.partial(_save_locked, self._cache_file.save, lock)
        # the machine code's files carry a digest, checked at each load
        self._cache_file._save_data = functools.partial(_save_checked, self._cache_file)
        self._cache_file._load_data = functools.partial(_load_checked, self._cache_file)

    @property
    def folder(self) -> str:
        """The folder this cache keeps its index and machine code in."""
        return self._cache_path

    def load_overload(self, sig, target_context):
        if not _LIGHT:
            return super().load_overload(sig, target_context)
        try:
            runtime.initialize(target_context, self._cache_path)
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)
        except Exception:
            return super().load_overload(sig, target_context)


def _save_locked(save, lock: str, key, data) -> None:
    with compile_lock.saving(lock):
        save(key, data)


# a data file's head: this tag, then the SHA-256 of its name and the pickled bytes after it
_CHECKED = b"varvedb-nbc-sha256\n"
_HEAD = len(_CHECKED) + 32


def _digest(name: str, body) -> bytes:
    """The digest of data file `name` (the index's name for one key: its identity,
    which a file's bytes alone do not say) holding `body`."""
    digest = hashlib.sha256(name.encode() + b"\0")
    digest.update(body)
    return digest.digest()


def _save_checked(cache_file, name: str, data) -> None:
    """numba's IndexDataCacheFile._save_data, the bytes headed by their digest."""
    body = cache_file._dump(data)
    with cache_file._open_for_write(cache_file._data_path(name)) as f:
        f.write(_CHECKED + _digest(name, body) + body)


def _load_checked(cache_file, name: str):
    """numba's IndexDataCacheFile._load_data, refusing (OSError: numba's load
    reads it as a miss, and the kernel is compiled again) a file whose name and
    bytes do not match their digest, or that has none."""
    path = cache_file._data_path(name)
    with open(path, "rb") as f:
        data = f.read()
    body = memoryview(data)[_HEAD:]
    if not data.startswith(_CHECKED) or _digest(name, body) != data[len(_CHECKED):_HEAD]:
        raise OSError(f"{path}: the cached machine code does not match its digest")
    return pickle.loads(body)


def cache_folder() -> str:
    """The folder numba's disk cache keeps this package's kernels in (the
    package's __pycache__, or under NUMBA_CACHE_DIR when that is set)."""
    return LoadOnlyCache(cache_folder).folder


def njit(readonly=(), literal=(), **options):
    """``numba.njit(**options)`` with :class:`LoadOnlyCache` for ``cache=True``,
    compiling :data:`READ_ONLY` and ``readonly`` parameters as read-only arrays,
    and literal arguments as their plain type but for the parameters in ``literal``."""
    cache = options.pop("cache", False)
    inline = options.get("inline", "never") != "never"
    # numba compiles a kernel whose options leave these unset with its first
    # caller's (targetconfig's inherit_if_not_set): a fixed-order float64 sum
    # (distance._sum4) first compiled under a fastmath kernel's call was fused and
    # reassociated, and that code was cached for every later call of the same
    # types. Set, a kernel's code depends on its own options only, not on which
    # caller compiled it first (warm's order or a process's).
    options.setdefault("fastmath", False)
    options.setdefault("error_model", "python")

    def wrap(fn):
        dispatcher = _numba_njit(**options)(fn)
        if cache and not inline:
            dispatcher._cache = LoadOnlyCache(fn)
        if not inline:
            _compile_plain(dispatcher, fn, readonly, literal)
            _first_call_lighter(dispatcher)
        return dispatcher

    return wrap


def _compile_plain(dispatcher, fn, readonly, literal) -> None:
    """Make `dispatcher` compile its read-only parameters as read-only arrays and
    literal arguments (but those in `literal`) as their plain types."""
    params = list(inspect.signature(fn).parameters)
    unknown = (set(readonly) | set(literal)) - set(params)
    if unknown:
        raise TypeError(f"{fn.__name__} has no parameter {sorted(unknown)}")
    at = frozenset(i for i, name in enumerate(params) if name in READ_ONLY or name in readonly)
    keep = frozenset(i for i, name in enumerate(params) if name in literal)
    compile_exact = dispatcher.compile
    inserting, inserted = threading.Lock(), set()

    def plain(i, t):
        if i in at and isinstance(t, types.Array) and t.mutable:
            return t.copy(readonly=True)
        if i in at and isinstance(t, types.BaseTuple):
            # a packed argument (the graph's arrays): each array in it read-only
            return types.BaseTuple.from_types(
                [x.copy(readonly=True) if isinstance(x, types.Array) and x.mutable
                 else types.unliteral(x) for x in t])
        return t if i in keep else types.unliteral(t)

    def compile_once(sig):
        # another process compiling this (a compiler ahead) is waited for, and
        # what it saved loaded; a compiler ahead, and the process that started
        # it, hold the lock while they compile (under numba's lock: see compile_lock)
        cache = dispatcher._cache
        if not isinstance(cache, LoadOnlyCache) or sig in dispatcher.overloads:
            return compile_exact(sig)
        path = compile_lock.lock_path(cache.folder, fn, sig)
        if compile_lock.holds_locks():
            with global_compiler_lock, compile_lock.holding(path):
                return compile_exact(sig)
        compile_lock.wait_for(path)
        return compile_exact(sig)

    def compile(sig):
        # numba's own callers (a first call, a kernel calling this one) pass a
        # tuple of argument types; anything else is an explicit signature, kept
        if not isinstance(sig, tuple):
            return compile_exact(sig)
        reading = tuple(plain(i, t) for i, t in enumerate(sig))
        entry = compile_once(reading)
        if reading != sig:
            # the caller's exact types also dispatch straight to that code: a
            # call numba matches only by conversion costs ~35 us, not ~0.3 us.
            # Once: threads whose first calls raced here each inserted the same
            # types, numba found two exact matches, called none, and every later
            # call came here (under numba's compiler lock)
            with inserting:
                if sig not in inserted:
                    inserted.add(sig)
                    cres = dispatcher.overloads[reading]
                    dispatcher._insert([t._code for t in sig], cres.entry_point,
                                       cres.objectmode)
        return entry

    dispatcher.compile = compile


def _first_call_lighter(dispatcher) -> None:
    """A kernel's first call in a process, lighter where loading its cached code
    needs less than numba prepares (~20 ms of CPU of a fresh open + first search):

    - numba types each argument of a first call in Python, and its type of an
      ndarray first asks whether it is a numpy.ma.MaskedArray, so numpy imports
      numpy.ma (~10 ms). A plain ndarray (and a tuple of them, a packed
      argument) is typed here as numba types it, without that question.
    - numba loads every installed package's `numba_extensions` entry points
      before typing a first call (importlib.metadata reads each distribution's
      metadata: ~10 ms in this venv). A kernel takes numpy arrays and numbers
      only, so nothing here needs them; compiling still loads them first (numba's
      target context does, at its refresh), and any other dispatcher's first call.
    """
    numba_typeof = dispatcher.typeof_pyval
    active = dispatcher._types_active_call   # (numba keeps each type alive the call long)

    def typeof_pyval(val):
        try:
            tp = _argument_type(val)
        except Exception:       # what numba types another way, or not at all: its own
            return numba_typeof(val)
        active.add(tp)
        return tp

    dispatcher.typeof_pyval = typeof_pyval
    dispatcher._compilation_chain_init_hook = _no_extensions


def _no_extensions() -> None:
    """(see _first_call_lighter)"""


def _argument_type(val):
    """numba's type of a kernel argument, an ndarray's (and so a tuple's) made
    here as numba.core.typing.typeof's _typeof_ndarray makes it."""
    if type(val) is np.ndarray:
        return types.Array(from_dtype(val.dtype), val.ndim, map_layout(val),
                           readonly=not val.flags.writeable)
    if type(val) is tuple:
        return types.BaseTuple.from_types([_argument_type(v) for v in val], tuple)
    return typeof(val, Purpose.argument)


def direct(dispatcher, *args):
    """The machine code `dispatcher` runs for arguments of exactly these types,
    compiled (or loaded) now: a function called without numba's dispatch, which
    types each argument on every call (~60 ns an argument; 0.8 of a 1 000-row
    search's 11 µs). It checks no type: the caller passes only arguments of the
    types given here, the same arrays or fresh ones of the same dtype, number
    of dimensions and layout.

    Found again by the arguments' type fingerprints (numba's dispatcher's own
    key, ~0.2 µs an argument): typing the 13 arguments of a flat scan with
    typeof and looking the signature up in the dispatcher took ~240 µs of CPU,
    against a 30-row scan's ~3 µs, for every one-shot search.

    An array of the other byte order ('>f4') has the same fingerprint as a native
    one, and numba compiles no kernel for it: refused (TypeError), never looked up."""
    try:
        key = (dispatcher, *map(compute_fingerprint, args))
    except NotImplementedError:         # a type numba keeps no fingerprint for
        return dispatcher.compile(tuple(dispatcher.typeof_pyval(a) for a in args))
    if not all([a.dtype.isnative for a in args if type(a) is np.ndarray]):
        raise TypeError(f"{dispatcher.__name__} takes arrays of the machine's byte order")
    entry = _directs.get(key)
    if entry is None:
        entry = _directs[key] = dispatcher.compile(
            tuple(dispatcher.typeof_pyval(a) for a in args))
    return entry


# direct's entry points by (dispatcher, each argument's type fingerprint): a few
# per kernel, for the process's life, as the dispatchers' own overloads are
_directs: dict[tuple, object] = {}
