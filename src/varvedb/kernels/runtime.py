"""numba's runtime (NRT) for cached kernels, its machine code kept in the disk cache.

Before a process runs its first kernel, numba compiles the runtime's helper
functions (NRT_incref, NRT_decref, NRT_MemInfo_data_fast, ...: numba's
nrtdynmod) with LLVM, in every process: ~20 ms of CPU, a fifth of a fresh
process's open + first search of 100k x 128. Their machine code is the same
in every process for one numba, llvmlite and CPU, so it is compiled once with
numba's object-code caching on, saved in the kernels' cache folder (numba's
own serialisation, as numba caches a kernel) and linked by later processes
(~3 ms). numba still does the rest of its set-up (the C helpers' symbols, its
statistics switch); a file that cannot be read is compiled and written again,
and a folder that cannot be written leaves numba's own compilation. The file
is the sha256 of its payload, then the payload (the pickle): machine code
damaged on disk that still unpickles would be linked and run (SIGTRAP, or
worse, in every new process), so a payload that does not match is compiled
and written again too.
"""
from __future__ import annotations

import functools
import hashlib
import os
import pickle

import llvmlite
import numba
from numba.core.compiler_lock import global_compiler_lock
from numba.core.runtime import nrtdynmod, rtsys


def initialize(ctx, folder: str) -> None:
    """numba's rtsys.initialize(ctx), its compiled functions read from `folder`
    when an earlier process saved them there."""
    with global_compiler_lock:
        compile_nrt = nrtdynmod.compile_nrt_functions
        nrtdynmod.compile_nrt_functions = functools.partial(_cached, folder)
        try:
            rtsys.initialize(ctx)
        finally:
            nrtdynmod.compile_nrt_functions = compile_nrt


def path(ctx, folder: str) -> str:
    """Where the runtime's machine code for this numba, llvmlite and CPU is kept."""
    key = repr((numba.__version__, llvmlite.__version__, ctx.codegen().magic_tuple()))
    return os.path.join(folder, f"varvedb-nrt-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
                                ".nbc")


_DIGEST = hashlib.sha256().digest_size     # the file's first bytes: its payload's sha256


def _cached(folder: str, ctx):
    """numba's compile_nrt_functions(ctx) (the library of the runtime's functions),
    loaded from the cache, or compiled as numba does and saved there."""
    where = path(ctx, folder)
    try:
        with open(where, "rb") as f:
            data = f.read()
        payload = data[_DIGEST:]
        if hashlib.sha256(payload).digest() != data[:_DIGEST]:
            raise ValueError(f"{where}: its payload is not the one written")
        state = pickle.loads(payload)
    except Exception:          # none yet, or a damaged file: compiled and written again
        pass
    else:
        return ctx.codegen().unserialize_library(state)
    ir_module, library = nrtdynmod.create_nrt_module(ctx)
    library.enable_object_caching()
    library.add_ir_module(ir_module)
    library.finalize()
    try:
        tmp = f"{where}.{os.getpid()}.tmp"
        payload = pickle.dumps(library.serialize_using_object_code(),
                               protocol=pickle.HIGHEST_PROTOCOL)
        with open(tmp, "wb") as f:
            f.write(hashlib.sha256(payload).digest() + payload)
        os.replace(tmp, where)
    except OSError:
        pass                   # a folder this process cannot write: compiled each time
    return library
