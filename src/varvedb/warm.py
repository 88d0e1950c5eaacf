"""`varvedb warm`: compile every kernel the installed features use, ahead of use,
on every core.

Why: numba compiles a kernel at its first call with a new signature, once per
machine (then it loads from the disk cache in milliseconds). Left to itself a
new user's first text search waits tens of seconds on one core, and a server's
first request times out. Warming runs small real workloads ("shares": full-text,
each vector dtype with and without a graph, quantised graphs, IVF-Flat and
IVF-PQ, ...) through the public API, so exactly the specialisations that real
use compiles get compiled (an indexed share holds more rows than the planner's
exact-scan threshold: below it no search would reach the index), each
share in a worker process of its own, all cores busy, into the shared on-disk
cache. The calling process runs each share again as soon as a worker has
finished it (beside the workers still compiling, not after them): everything
loads from the cache (so its kernels are loaded too, which a server wants
before it listens), and anything a worker lost is compiled there, and counted.

A warm that ends with nothing left to compile leaves a mark in the kernels'
cache folder, named by a hash of everything the machine code depends on (the
package's source, whose callers decide the types kernels compile for, and
numba's and Python's versions): the next warm
finds it and returns at once, so `make test` and every `varvedb serve` pay for
a warm only when the kernels, numba or the cache changed.

The workers are spawned, not forked: a fork of a process holding numba's
compiler lock or a server's threads is not safe.
"""
from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from tqdm import tqdm

import varvedb as vv
from .index import flat, fts, prefetch
from .kernels import ahead, compile_log
from .query.planner import EXACT_ROWS
from .transfer import export_file

WORDS = ("river ice varve layer sediment lake summer winter clay silt core year "
         "pollen glacier melt season").split()
ROWS = 600
# an indexed share's rows: its searches, and its filtered ones (nine tags in ten),
# allow more rows than the planner's exact-scan threshold, so they use the index
GRAPH_ROWS = EXACT_ROWS * 5 // 4
DIM = 16


def _texts(rng, rows: int) -> list[str]:
    words = np.array(WORDS, dtype=object)
    return [" ".join(w) for w in words[rng.integers(0, len(WORDS), (rows, 6))]]


def _vectors(rng, dtype: str, rows: int, dim: int) -> np.ndarray:
    if dtype == "bit":
        return rng.integers(0, 2, (rows, dim)).astype(bool)
    if dtype == "int8":
        return rng.integers(-100, 100, (rows, dim)).astype(np.int8)
    return rng.standard_normal((rows, dim)).astype(np.float16 if dtype == "f16" else np.float32)


def text_share(folder: str) -> None:
    """Full-text: tokenize, segments, BM25 top-k, phrases, SQL's @@ and bm25(), merges,
    reopen."""
    rng = np.random.default_rng(1)
    path = os.path.join(folder, "text.varve")
    with vv.connect(path) as db:
        docs = db.create_collection("docs", {"body": vv.Text(fts=True),
                                             "title": vv.Text(fts=True, stem="english"),
                                             "tag": vv.Int(index="hash")})
        for lo in range(0, 4 * ROWS, ROWS):          # several segments, then a merge
            docs.insert_arrays(id=np.arange(lo, lo + ROWS), body=_texts(rng, ROWS),
                               title=_texts(rng, ROWS), tag=np.arange(ROWS) % 7)
        docs.insert({"id": 10**6, "body": "Zürich's naïve café: ÉTÉ 2024", "title": "x"})
        for query in ("lake clay", "river", '"summer winter"', "melt -ice", "lake OR silt"):
            docs.search(text=query, text_field="body", limit=10)
            docs.search(text=query, text_field="body", where="tag = 3", limit=5)
        docs.search(text="glaciers", text_field="title", limit=5)
        # a question in plain words: any word matches (MaxScore over the terms)
        docs.search(text="how does the lake melt", text_field="body", match="any", limit=10)
        docs.search(text="how does the lake melt", text_field="body", match="any",
                    where="tag = 3", limit=5)
        docs.update({"body": "moved river"}, where="id < 50")
        docs.delete(where="id >= 100 AND id < 150")
        db.sql("SELECT count(*) FROM docs WHERE body @@ 'river'")
        db.sql("SELECT id FROM docs WHERE body @@ 'lake' ORDER BY id LIMIT 3")
        # bm25() in a select list scores the rows it is given (bm25.add_scores)
        db.sql("SELECT id, bm25(body, 'lake clay') FROM docs WHERE body @@ 'lake' LIMIT 3")
        # PostgreSQL's: to_tsvector @@ (words, a phrase), ts_rank, ts_rank_cd
        for q in ("lake & !clay", "lake <-> clay | river"):
            db.sql("SELECT id, ts_rank(to_tsvector('english', title), to_tsquery('english', $1)), "
                   "ts_rank_cd(to_tsvector('english', title), to_tsquery('english', $1)) "
                   "FROM docs WHERE to_tsvector('english', title) @@ to_tsquery('english', $1) "
                   "AND id < 200", [q])
        db.checkpoint()
    with vv.connect(path) as db:
        db["docs"].search(text="lake clay", text_field="body", limit=10)
        db.vacuum(progress=False)
        db.verify()


def vector_share(dtype: str, index) -> Callable[[str], None]:
    """A vector field of `dtype` under `index` (None: scanned): insert, searches in
    each metric the dtype takes, a filter, an update, near-ties settled exactly, a
    checkpoint and a reopen.

    Under an index the collection holds GRAPH_ROWS rows, above the planner's
    EXACT_ROWS, so that its searches reach what real use of an index reaches
    (below it every search is an exact scan): the graph walk or the IVF lists,
    filtered and not, through the API's and SQL's kept plans, the walk over a
    graph behind the writes (and the exact tail beside it), the reopened graph's
    checks, and vacuum's repair of the graph."""
    def share(folder: str) -> None:
        rng = np.random.default_rng(2)
        path = os.path.join(folder, "vectors.varve")
        metrics = ["hamming"] if dtype == "bit" else ["cosine", "l2", "dot", "l1"]
        dim = 64 if dtype == "bit" else DIM
        rows = ROWS if index is None else GRAPH_ROWS
        op = "<~>" if dtype == "bit" else "<=>"
        nearest = f"SELECT id FROM docs WHERE tag < 9 ORDER BY v {op} $1 LIMIT 5"
        with vv.connect(path) as db:
            docs = db.create_collection("docs", {
                "tag": vv.Int(index="sorted"),
                "v": vv.Vector(dim, dtype=dtype, metric=metrics[0])})
            docs.insert_arrays(id=np.arange(rows), tag=np.arange(rows) % 10,
                               v=_vectors(rng, dtype, rows, dim))
            if index is not None:
                docs.create_index("v", index)
                docs.wait_indexed()
            docs.insert_arrays(id=np.arange(rows, rows + 50), tag=np.arange(50) % 10,
                               v=_vectors(rng, dtype, 50, dim))
            docs.insert({"id": 10**6, "tag": 1, "v": _vectors(rng, dtype, 1, dim)[0]})
            queries = _vectors(rng, dtype, 3, dim)
            q = queries[0]
            docs.search(vector=q, limit=10)      # (under an index: maybe behind the writes)
            if index is not None:
                docs.wait_indexed()
            for metric in metrics:
                docs.search(vector=q, metric=metric, limit=10)
                docs.search(vector=q, metric=metric, where="tag < 3", limit=10)
                docs.search(vector=q, metric=metric, limit=10, exact=True)
            for again in queries:                # the second and third: the kept plan's
                docs.search(vector=again, limit=10)
                docs.search(vector=again, where="tag < 9", limit=10)
                db.sql(nearest, [again])
            docs.delete(where="tag = 9")
            docs.update({"tag": 11}, where="tag = 8")
            docs.search(vector=q, limit=10)
            # more rows tied with the k-th best than the scan keeps spare (copies of
            # one vector): the exact search settles them in rank_near, as a user's
            # duplicates do
            dup = _vectors(np.random.default_rng(3), dtype, 1, dim)
            docs.insert_arrays(id=np.arange(2 * 10**6, 2 * 10**6 + 24), tag=np.zeros(24, int),
                               v=np.repeat(dup, 24, axis=0))
            docs.search(vector=dup[0], limit=10, exact=True)
            db.sql("SELECT id FROM docs WHERE tag < 5 ORDER BY id LIMIT 5")
            if dtype == "f32" and index is None:
                _half_scan(db, rng)
            if dtype != "bit":     # a vector's text form (the wire, psql, CSV export)
                export_file(db, "docs", os.path.join(folder, "docs.csv"), where="tag < 1")
            db.checkpoint()
        with vv.connect(path) as db:
            db["docs"].search(vector=q, limit=10)
            db["docs"].search(vector=q, where="tag < 9", limit=10)
            if index is not None:
                db.vacuum(keep=1, progress=False, graphs="repair")   # drops the deleted
                db["docs"].search(vector=q, limit=10)
            db.verify()
    return share


def _half_scan(db, rng) -> None:
    """A shape searched past flat.HALF_AFTER times over rows wide and many enough:
    the scan through a float16 copy of the arena (index/flat.py), its float32
    near-ties (copies of one row) included."""
    dim = flat.HALF_DIM
    rows = -(-flat.HALF_MIN // dim)
    wide = db.create_collection("wide", {"v": vv.Vector(dim)})
    vectors = _vectors(rng, "f32", rows, dim)
    vectors[:24] = vectors[0]
    wide.insert_arrays(id=np.arange(rows), v=vectors)
    for _ in range(flat.HALF_AFTER + 1):
        wide.search(vector=vectors[0], limit=10)


def larger_than_memory_share(folder: str) -> None:
    """A file larger than half the memory this process may use (a memory cgroup's
    cap, a small machine): a rerank asks for its rows' pages together (fadvise;
    madvise where the file cannot be opened) through an arena advised
    MADV_RANDOM (index/prefetch.py). `auto` skips both on a file that fits, so
    they are called here, forced, on a small file's arena mapped from the file
    (the argument types are the same whatever the file's size)."""
    rng = np.random.default_rng(5)
    path = os.path.join(folder, "mapped.varve")
    with vv.connect(path) as db:
        docs = db.create_collection("docs", {"v": vv.Vector(DIM)})
        docs.insert_arrays(id=np.arange(ROWS), v=_vectors(rng, "f32", ROWS, DIM))
        db.checkpoint()
    with vv.connect(path) as db:
        table = db["docs"].table
        arena = table.columns["v"].arena.frozen(table.n)
        rows = rng.integers(0, ROWS, 40)
        for how in ("fadvise", "madvise"):
            prefetch.prefetch_rows(arena, rows, how)
        prefetch.advise_random(arena, force=True)


def sparse_share(folder: str) -> None:
    """A sparsevec column (kernels/sparse.py): each distance, equality, norms,
    l2_normalize, the casts to and from dense vectors, and the btree order's
    ranks (ORDER BY, DISTINCT, <), through SQL."""
    with vv.connect(os.path.join(folder, "sparse.varve")) as db:
        db.sql("CREATE TABLE items (id bigserial PRIMARY KEY, v sparsevec(8))")
        db.sql("INSERT INTO items (v) VALUES ('{1:1,3:2}/8'), ('{2:-1,8:4}/8'), (NULL)")
        db.sql("SELECT id, v <-> '{1:1}/8', l2_norm(v), l2_normalize(v), v::vector, "
               "'[0,1,0,0,0,0,0,2]'::vector::sparsevec FROM items "
               "WHERE v = '{1:1,3:2}/8' OR v <> v ORDER BY v <=> '{3:1}/8' LIMIT 2")
        db.sql("SELECT DISTINCT v, v < '{2:1}/8' FROM items ORDER BY v")


# In the order the workers take them, so that two shares running at once do not
# compile the same kernels (each would, and the second core would buy nothing),
# and the longest start first: the f32 graph's build beside full-text (its pruned
# top-k is the largest single kernel), then the other arena types' graphs, which
# find the build's dtype-free kernels compiled; the quantised graphs of one
# walk type (pq: uint8 codes, for f32 and f16 arenas) apart; the short ones last.
SHARES = {
    # (quantize=None: the walk on the vectors; the default, "auto", walks int8
    # codes over the dimensions most fields have: the shares named "int8")
    "f32 HNSW": vector_share("f32", vv.HNSW(m=8, ef_construction=32, quantize=None)),
    "full-text": text_share,
    "f16 HNSW": vector_share("f16", vv.HNSW(m=8, ef_construction=32, quantize=None)),
    "int8 HNSW": vector_share("int8", vv.HNSW(m=8, ef_construction=32)),
    "bit HNSW": vector_share("bit", vv.HNSW(m=8, ef_construction=32)),
    "f32 HNSW pq": vector_share("f32", vv.HNSW(m=8, ef_construction=32, quantize="pq",
                                               pq_m=4)),
    "f32 scan": vector_share("f32", None),
    "f32 HNSW int8": vector_share("f32", vv.HNSW(m=8, ef_construction=32, quantize="int8")),
    "f16 HNSW int8": vector_share("f16", vv.HNSW(m=8, ef_construction=32, quantize="int8")),
    "f32 IVF-PQ": vector_share("f32", vv.IVFPQ(lists=8, pq_m=4, nprobe=4)),
    "f16 HNSW pq": vector_share("f16", vv.HNSW(m=8, ef_construction=32, quantize="pq",
                                               pq_m=4)),
    # IVFPQ's default, pq_m=None: IVF-Flat, over each dtype it takes
    **{f"{dtype} IVF-Flat": vector_share(dtype, vv.IVFPQ(lists=8, nprobe=4))
       for dtype in ("f32", "f16", "int8")},
    "larger than memory": larger_than_memory_share,
    "sparsevec": sparse_share,
}


def first_text_share(folder: str) -> None:
    """A full-text field's first use: insert, a search of one word, of two and of
    any of a question's words, SQL's @@."""
    fts.compile_query_kernels()
    rng = np.random.default_rng(1)
    with vv.connect(os.path.join(folder, "text.varve")) as db:
        docs = db.create_collection("docs", {"body": vv.Text(fts=True)})
        docs.insert_arrays(id=np.arange(ROWS), body=_texts(rng, ROWS))
        docs.search(text="lake clay", limit=10)
        docs.search(text="river", limit=10)
        docs.search(text="where is the lake clay", match="any", limit=10)
        db.sql("SELECT count(*) FROM docs WHERE body @@ 'river'")


def first_scan_share(dtype: str) -> Callable[[str], None]:
    """A scanned vector field of `dtype`'s first use: insert, one search."""
    def share(folder: str) -> None:
        rng = np.random.default_rng(2)
        dim = 64 if dtype == "bit" else DIM
        metric = "hamming" if dtype == "bit" else "cosine"
        with vv.connect(os.path.join(folder, "scan.varve")) as db:
            docs = db.create_collection("docs", {"v": vv.Vector(dim, dtype=dtype,
                                                                 metric=metric)})
            docs.insert_arrays(id=np.arange(ROWS), v=_vectors(rng, dtype, ROWS, dim))
            docs.search(vector=_vectors(rng, dtype, 1, dim)[0], limit=10)
    return share


# What a compiler ahead (kernels/ahead.py) runs for a collection's fields (the
# names its shares_for gives): the kernels of a first insert and search, not
# every path a warm covers.
AHEAD = {"text": first_text_share,
         **{f"{dtype} scan": first_scan_share(dtype) for dtype in ("f32", "f16", "int8", "bit")}}


def compile_ahead(shares: list[str]) -> None:
    """Run AHEAD's `shares` in this process, in order (a compiler ahead's work: it
    holds each kernel's lock while compiling it), marking each one done."""
    compile_log.quiet()
    # ended by the process that started it: unwind, so the scratch folder goes
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(0))
    for name in shares:
        with tempfile.TemporaryDirectory(prefix="varvedb-ahead-") as folder:
            AHEAD[name](folder)
        ahead.share_mark(name).touch()


@dataclass
class WarmReport:
    """What a warm did: specialisations compiled by the workers (by kernel: how
    many, and their seconds of their own, wall and CPU), those the calling process
    still had to compile, processes and wall seconds."""

    compiled: dict[str, int] = field(default_factory=dict)
    compile_seconds: dict[str, float] = field(default_factory=dict)
    compile_cpu_seconds: dict[str, float] = field(default_factory=dict)
    compiled_here: int = 0
    here: list[str] = field(default_factory=list)    # those kernels, in order
    processes: int = 0
    seconds: float = 0.0

    def summary(self) -> str:
        n = sum(self.compiled.values())
        if not self.processes:
            return "kernels already compiled (an earlier warm of this cache)"
        if not n and not self.compiled_here:
            return (f"kernels already compiled: {len(SHARES)} feature sets loaded from the "
                    f"cache in {self.seconds:.1f} s")
        return (f"compiled {n} specialisations of {len(self.compiled)} kernels in "
                f"{self.processes} processes, {self.seconds:.1f} s"
                + (f" ({self.compiled_here} more in this process)" if self.compiled_here
                   else ""))


def run_share(name: str) -> list[compile_log.Compilation]:
    """Run one share in a scratch folder (a worker's job); what it compiled."""
    compile_log.quiet()
    before = compile_log.compilation_count()
    with tempfile.TemporaryDirectory(prefix="varvedb-warm-") as folder, ahead.off():
        SHARES[name](folder)
    return compile_log.compilations()[before:]


def die_with_parent(parent: int) -> None:
    """In a child process: ask the kernel (Linux) for SIGTERM when the parent
    ends, and end now if it has ended already."""
    if sys.platform.startswith("linux"):
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)    # PR_SET_PDEATHSIG
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGTERM)


def warm(processes: int | None = None, progress: bool = True, echo=None,
         again: bool = False) -> WarmReport:
    """Compile every share's kernels in `processes` worker processes (default: one
    per core), a progress bar on stderr when `progress`; load each share's here as
    soon as its worker has finished it.
    `echo`, when given, is told once a worker had to compile (never when every
    kernel was cached). Returns at once (an empty report) when the cache holds
    the mark of an earlier complete warm, unless `again`."""
    t0 = time.perf_counter()
    mark = ahead.warmed_mark()
    if mark.exists() and not again:
        return WarmReport(seconds=time.perf_counter() - t0)
    report = WarmReport(processes=processes or len(os.sched_getaffinity(0)))
    # a worker ends with this process, even SIGKILLed (`varvedb serve` killed
    # during its warm left them compiling, then waiting on the pool for ever)
    pool = cf.ProcessPoolExecutor(report.processes,
                                  mp_context=multiprocessing.get_context("spawn"),
                                  initializer=die_with_parent, initargs=(os.getpid(),))
    compile_log.quiet()
    before = compile_log.compilation_count()
    try:
        jobs = {pool.submit(run_share, name): name for name in SHARES}
        told = echo is None
        with tqdm(total=len(jobs), desc="warming kernels", unit="set",
                  disable=not progress) as bar:
            for job in cf.as_completed(jobs):
                done = job.result()
                for c in done:
                    report.compiled[c.kernel] = report.compiled.get(c.kernel, 0) + 1
                    report.compile_seconds[c.kernel] = (
                        report.compile_seconds.get(c.kernel, 0.0) + c.seconds)
                    report.compile_cpu_seconds[c.kernel] = (
                        report.compile_cpu_seconds.get(c.kernel, 0.0) + c.cpu_seconds)
                if done and not told:
                    told = True
                    echo("compiling kernels, first run on this machine")
                # this process runs the share as soon as a worker has finished it
                # (its kernels are all in the cache then), beside the workers still
                # compiling: not after the last of them, on one core while the
                # others idle (16 shares' loads, checkpoints and fsyncs: 11 s of a
                # loaded 2-core machine's wall, 3.5 s of CPU)
                run_share(jobs[job])
                bar.update(1)
    finally:
        # not waited for: a spawned worker's exit after a cold compile (its
        # interpreter's teardown) took 3-17 s on a loaded 2-core machine, which
        # this process's own runs of the last shares overlap instead of following
        # (the pool's thread reaps the workers; an exiting interpreter waits for it)
        pool.shutdown(wait=False, cancel_futures=True)
    report.here = [c.kernel for c in compile_log.compilations()[before:]]
    report.compiled_here = len(report.here)
    if not report.compiled_here:
        mark.touch()
    report.seconds = time.perf_counter() - t0
    return report
