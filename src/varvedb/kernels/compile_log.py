"""What numba compiled in this process: a count, and each compilation's kernel and cost.

Why: numba compiles a kernel the first time it meets a new signature, once
per machine (the machine code then loads from the disk cache). That stall is
invisible from outside: a first search takes seconds and nothing says why. So
one listener on numba's own ``numba:compile`` event (which fires only when
a dispatcher really compiles: neither a disk-cache load nor a signature it
already holds fires it) records every compilation in the process, and

- tests read :func:`compilation_count` to say "zero compiled" where they mean it
  (after ``varvedb warm``, once a server listens);
- ``varvedb warm --report`` and the first-use figures read :func:`compilations`:
  each kernel's name, signature and seconds of its own (a kernel compiled while
  its caller compiles is timed apart from the caller), wall and CPU: the
  compiling thread's CPU seconds are what a compilation costs whatever else the
  machine runs (on a loaded 2-core machine a warm's wall seconds were 5-10 times
  its CPU seconds, kernel by kernel);
- the first compilation in a process that did not warm says so, once, on
  stderr when stderr is a terminal: a plain write, not ``logging`` (whose
  messages stay quiet by default), so no logging configuration hides it.

The listener is registered once, when this module is imported (kernels/jit.py
imports it, so before any kernel exists).
"""
from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass

from numba.core import event

NOTICE = ("varvedb: compiling numba kernels (first use on this machine; "
          "`varvedb warm` compiles them all ahead, on every core)\n")


@dataclass(frozen=True)
class Compilation:
    """One compilation: the kernel (module.qualname), its argument types, and the
    seconds it took apart from the kernels compiled inside it: wall, and the
    compiling thread's CPU."""

    kernel: str
    signature: str
    seconds: float
    cpu_seconds: float


class CompileLog(event.Listener):
    """Records numba's compilations; thread-safe (numba compiles under its own
    global lock, so compilations nest but never interleave)."""

    def __init__(self) -> None:
        self.done: list[Compilation] = []
        self.noticed = False   # the stderr notice was written (or is not wanted)
        self._lock = threading.Lock()
        # per level: [start, CPU start, wall and CPU seconds of nested compilations]
        self._open: list[list] = []

    def on_start(self, ev) -> None:
        if not self.noticed:
            self.noticed = True
            if sys.stderr is not None and sys.stderr.isatty():
                sys.stderr.write(NOTICE)
                sys.stderr.flush()
        with self._lock:
            self._open.append([time.perf_counter(), time.thread_time(), 0.0, 0.0])

    def on_end(self, ev) -> None:
        with self._lock:
            start, cpu_start, nested, nested_cpu = self._open.pop()
            took = time.perf_counter() - start
            cpu = time.thread_time() - cpu_start
            if self._open:
                self._open[-1][2] += took
                self._open[-1][3] += cpu
            dispatcher = ev.data["dispatcher"]
            fn = dispatcher.py_func
            self.done.append(Compilation(
                f"{fn.__module__}.{fn.__qualname__}",
                ", ".join(str(t) for t in ev.data["args"]),
                took - nested, cpu - nested_cpu))


LOG = CompileLog()
event.register("numba:compile", LOG)


def compilation_count() -> int:
    """How many specialisations numba has compiled in this process so far (0 when
    every kernel called came from the disk cache)."""
    return len(LOG.done)


def compilations() -> list[Compilation]:
    """Every compilation in this process so far, in the order they finished."""
    return list(LOG.done)


def quiet() -> None:
    """No stderr notice in this process: it compiles on purpose (``varvedb warm``)."""
    LOG.noticed = True
