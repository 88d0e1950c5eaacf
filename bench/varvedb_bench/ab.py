"""`varvedb bench ann --dataset SPEC --ab varvedb,hnswlib`: engines A/B in one process.

Every engine is built on the same rows with the same graph parameters, then
queried on the same queries, one at a time on one thread, interleaved query by
query (on query i the engines run in an order rotated by i, so none is always
first after another one's cache traffic). A ratio therefore does not depend on
which minute each engine ran. Per (engine, ef) over `rounds` rounds: recall@10,
QPS per round (queries / summed time of its queries), p50 / p99 latency; per
round the ratio of each engine's QPS to the reference's (the first peer that
is not varvedb). On each engine's recall / QPS curve the QPS at recall 0.90 /
0.95 / 0.99 is interpolated (linear in recall between the two sweep points
around the target), per round too, so the ratio at equal recall has a spread.

Builds alternate too: `build_rounds` rounds, each building every engine again
(the order reversed every other round), 2 threads for the libraries
(hnswlib num_threads=2, FAISS OpenMP 2) and varvedb's own background build.

IVF engines (`varvedb:ivfpq`, `varvedb:ivfflat`, `faiss:ivfpq`: IndexIVFPQ under
an IndexRefineFlat, the exact rerank) take the same `lists`, `pq_m` and
`rerank` (candidates measured exactly: FAISS's k_factor = rerank / 10), and
read each sweep value as the lists probed instead of ef. Curves are compared
at equal recall, so graph and IVF engines can share one run.

Output: OUT/ab-<dataset>-<rows>x<dim>.{json,md,png}.
"""
from __future__ import annotations

import gc
import math
import os
import platform
import shutil
import tempfile
import time

import numpy as np
from tqdm import tqdm

from varvedb.errors import OptionError
from . import data, report

K = 10
EF_SWEEP = [10, 20, 40, 80, 120, 200, 300, 400, 600, 800]
TARGETS = (0.90, 0.95, 0.99)
BUILD_THREADS = 2
WARMUP = 20              # untimed queries per engine before each ef's rounds


# -- engines ------------------------------------------------------------------------

class _AB:
    """One engine's in-process index: build, search one query, sizes."""
    label = kind = "?"
    build_threads = BUILD_THREADS

    def __init__(self, label: str, dim: int, metric: str, workdir: str):
        self.label, self.dim, self.metric, self.workdir = label, dim, metric, workdir
        self.note = ""

    def build(self, train: np.ndarray, m: int, ef_construction: int) -> float:
        """Build from scratch; returns the seconds the index took."""
        raise NotImplementedError

    def warm(self, train: np.ndarray, m: int, ef_construction: int) -> None:
        """One-off costs (JIT compiles) paid before the timed builds."""

    def set_ef(self, ef: int) -> None:
        self.ef = ef

    def search(self, q: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def graph_bytes(self) -> int:
        raise NotImplementedError

    def vector_bytes(self, n: int) -> int:
        return n * self.dim * 4

    def close(self) -> None:
        pass


class VarveAB(_AB):
    kind = "varvedb"

    def __init__(self, label, dim, metric, workdir, option=None, ivf=None):
        super().__init__(label, dim, metric, workdir)
        import varvedb as vv
        self.vv, self.option, self.ivf, self.db, self.builds = vv, option, ivf, None, 0
        # varvedb: the default index (vv.HNSW(): quantize="auto"); :int8 and :f32 name
        # the walk on int8 codes and the walk on the vectors themselves
        self.quantize = {"int8": "int8", "f32": None}.get(option, "auto")

    def _spec(self, m, ef_construction):
        vv = self.vv
        if self.option in ("ivfpq", "ivfflat"):
            pq = self.ivf["pq_m"] if self.option == "ivfpq" else None
            return vv.IVFPQ(lists=self.ivf["lists"], pq_m=pq, rerank=self.ivf["rerank"])
        return vv.HNSW(m=m, ef_construction=ef_construction, quantize=self.quantize)

    def build(self, train, m, ef_construction):
        vv = self.vv
        self.close()
        self.builds += 1
        path = os.path.join(self.workdir, f"{self.label.replace(':', '-')}-{self.builds}.varve")
        self.db = vv.connect(path)
        self.coll = self.db.create_collection("items", {
            "embedding": vv.Vector(self.dim, metric=self.metric)})
        with self.db.transaction():
            for lo in range(0, len(train), 50_000):
                self.coll.insert_arrays(id=np.arange(lo, min(len(train), lo + 50_000)),
                                        embedding=train[lo:lo + 50_000])
        spec = self._spec(m, ef_construction)
        t = time.perf_counter()
        self.coll.create_index("embedding", spec)
        while self.coll.index_status()["unlinked"]:     # the index links in the background
            time.sleep(0.001)
        took = time.perf_counter() - t
        self.width = "probes" if isinstance(spec, vv.IVFPQ) else "ef"
        self.note = (f"collection.search(vector=q, limit=10, {self.width}=sweep value, "
                     f"select=[]); {spec!r}; build = create_index until "
                     "index_status()['unlinked'] == 0 (the rows inserted before, untimed), "
                     f"on numba's {self.build_threads} threads")
        return took

    @property
    def build_threads(self) -> int:
        # the background build runs on numba's default thread count (NUMBA_NUM_THREADS)
        import numba
        return int(numba.config.NUMBA_NUM_THREADS)

    def warm(self, train, m, ef_construction):
        # numba compiles the build and the walk on first use (or loads its cache)
        lists = self.ivf["lists"] if self.option in ("ivfpq", "ivfflat") else 0
        self.build(train[:max(512, 4 * max(lists, 256))], m, ef_construction)
        self.set_ef(K)
        self.search(train[0])
        self.close()

    def search(self, q):
        return self.coll.search(vector=q, limit=K, select=[], **{self.width: self.ef}).ids

    def graph_bytes(self):
        return self.coll.vector_memory()["graph_bytes"]

    def close(self):
        if self.db is not None:
            self.db.close()
            self.db = None
            shutil.rmtree(self.workdir, ignore_errors=True)
            os.makedirs(self.workdir, exist_ok=True)


class HnswlibAB(_AB):
    kind = "hnswlib"
    SPACES = {"l2": "l2", "cosine": "cosine", "dot": "ip"}

    def __init__(self, label, dim, metric, workdir):
        super().__init__(label, dim, metric, workdir)
        self.hnswlib = _require("hnswlib", "hnswlib")
        self.index = None

    def build(self, train, m, ef_construction):
        self.index = None
        index = self.hnswlib.Index(space=self.SPACES[self.metric], dim=self.dim)
        t = time.perf_counter()
        index.init_index(max_elements=len(train), M=m, ef_construction=ef_construction,
                         random_seed=100)
        index.add_items(train, np.arange(len(train)), num_threads=BUILD_THREADS)
        took = time.perf_counter() - t
        self.index, self.n = index, len(train)
        self.note = (f"hnswlib.Index M={m} ef_construction={ef_construction}, add_items on "
                     f"{BUILD_THREADS} threads; set_ef(ef), knn_query(q, k=10, num_threads=1)")
        return took

    def set_ef(self, ef):
        self.index.set_ef(ef)

    def search(self, q):
        return self.index.knn_query(q, k=K, num_threads=1)[0][0]

    def graph_bytes(self):
        # the saved index is its in-memory layout (links, labels, levels): less the vectors
        path = os.path.join(self.workdir, "hnswlib.index")
        self.index.save_index(path)
        size = os.path.getsize(path)
        os.unlink(path)
        return size - self.n * self.dim * 4


class FaissAB(_AB):
    kind = "faiss"

    def __init__(self, label, dim, metric, workdir):
        super().__init__(label, dim, metric, workdir)
        self.faiss = _require("faiss", "faiss-cpu")
        self.index = None

    def prepare(self, x: np.ndarray) -> np.ndarray:
        """FAISS has no cosine: inner product over normalized vectors."""
        if self.metric == "cosine":
            x = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-30)
        return np.ascontiguousarray(x, np.float32)

    def build(self, train, m, ef_construction):
        faiss = self.faiss
        self.index = None
        x = self.prepare(train)
        metric = faiss.METRIC_L2 if self.metric == "l2" else faiss.METRIC_INNER_PRODUCT
        faiss.omp_set_num_threads(BUILD_THREADS)
        t = time.perf_counter()
        index = faiss.IndexHNSWFlat(self.dim, m, metric)
        index.hnsw.efConstruction = ef_construction
        index.add(x)
        took = time.perf_counter() - t
        faiss.omp_set_num_threads(1)      # queries: one at a time on one thread
        self.index = index
        self.note = (f"IndexHNSWFlat M={m} efConstruction={ef_construction}, add on "
                     f"{BUILD_THREADS} OpenMP threads; queries on 1 thread, hnsw.efSearch = ef"
                     + ("; cosine as inner product, rows and queries normalized beforehand "
                        "(untimed)" if self.metric == "cosine" else ""))
        return took

    def set_ef(self, ef):
        self.index.hnsw.efSearch = ef

    def search(self, q):
        return self.index.search(q.reshape(1, -1), K)[1][0]

    def graph_bytes(self):
        h = self.index.hnsw
        # link storage: neighbour ids (int32), each node's offset (size_t) and level (int32)
        return h.neighbors.size() * 4 + h.offsets.size() * 8 + h.levels.size() * 4


class FaissIvfAB(FaissAB):
    """FAISS IndexIVFPQ (8-bit codes of the residuals) under IndexRefineFlat."""

    def __init__(self, label, dim, metric, workdir, ivf=None):
        super().__init__(label, dim, metric, workdir)
        self.ivf = ivf

    def warm(self, train, m, ef_construction):
        pass

    def build(self, train, m, ef_construction):
        faiss = self.faiss
        self.index = None
        x = self.prepare(train)
        lists, pq_m = self.ivf["lists"], self.ivf["pq_m"]
        metric = faiss.METRIC_L2 if self.metric == "l2" else faiss.METRIC_INNER_PRODUCT
        faiss.omp_set_num_threads(BUILD_THREADS)
        t = time.perf_counter()
        quantizer = (faiss.IndexFlatL2 if self.metric == "l2" else faiss.IndexFlatIP)(self.dim)
        base = faiss.IndexIVFPQ(quantizer, self.dim, lists, pq_m, 8, metric)
        index = faiss.IndexRefineFlat(base)
        index.train(x)
        index.add(x)
        took = time.perf_counter() - t
        faiss.omp_set_num_threads(1)
        self.index, self.base, self.quantizer = index, base, quantizer
        self.k_factor = max(1.0, (self.ivf["rerank"] or 8 * K) / K)
        self.note = (f"IndexRefineFlat(IndexIVFPQ(nlist={lists}, M={pq_m}, nbits=8)), "
                     f"train + add on {BUILD_THREADS} OpenMP threads; queries on 1 thread, "
                     f"nprobe = sweep value, k_factor {self.k_factor:g}")
        return took

    def set_ef(self, ef):
        self.params = self.faiss.IndexRefineSearchParameters(
            k_factor=self.k_factor, base_index_params=self.faiss.SearchParametersIVF(nprobe=ef))

    def search(self, q):
        return self.index.search(q.reshape(1, -1), K, params=self.params)[1][0]

    def graph_bytes(self):
        # the IVF-PQ part (codes, ids, centroids, codebooks): the refine copy is the vectors
        return len(self.faiss.serialize_index(self.base))


KINDS = {"varvedb": VarveAB, "hnswlib": HnswlibAB, "faiss": FaissAB}
OPTIONS = {"varvedb": ("int8", "f32", "ivfpq", "ivfflat"), "faiss": ("ivfpq",)}


def default_lists(rows: int) -> int:
    """pgvector's advice: rows / 1000 up to a million rows, sqrt(rows) beyond."""
    return max(1, rows // 1000 if rows <= 1_000_000 else int(math.sqrt(rows)))


def ivf_settings(rows: int, dim: int, lists: int | None = None, pq_m: int | None = None,
                 rerank: int | None = None) -> dict:
    """The IVF engines' shared settings, defaults filled in: lists by default_lists,
    pq_m a byte per 8 dimensions (per 4, 2 or 1 where 8 does not divide the dim)."""
    pq_m = pq_m or next(dim // s for s in (8, 4, 2, 1) if dim % s == 0)
    if dim % pq_m:
        raise OptionError(f"--pq-m {pq_m} does not divide the dimension {dim}")
    return {"lists": lists or default_lists(rows), "pq_m": pq_m, "rerank": rerank}


def parse_engines(spec: str) -> list[tuple[str, str, str | None]]:
    """"varvedb,varvedb:int8,hnswlib" -> [(label, kind, option)]."""
    out = []
    for part in (p.strip() for p in spec.split(",")):
        if not part:
            continue
        kind, _, opt = part.partition(":")
        if kind not in KINDS:
            raise OptionError(f"--ab: unknown engine {kind!r}; known: {', '.join(KINDS)}")
        if opt and opt not in OPTIONS.get(kind, ()):
            raise OptionError(f"--ab: {part!r}: the options are "
                              + "; ".join(f"{k}:{o}" for k, os_ in OPTIONS.items()
                                          for o in os_))
        if part in (o[0] for o in out):
            raise OptionError(f"--ab: {part!r} named twice")
        out.append((part, kind, opt or None))
    if len(out) < 2:
        raise OptionError(f"--ab needs at least two engines (e.g. varvedb,hnswlib), "
                          f"got {spec!r}")
    return out


def _require(module: str, package: str):
    import importlib
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise OptionError(f"--ab: {package} is not installed (pip install "
                          f"-e './bench[peers]'): {e}") from None


# -- figures ---------------------------------------------------------------------------

def qps_at_recall(recalls, qps, target: float) -> tuple[float | None, str]:
    """QPS at `target` recall on a curve given in sweep order (ef rising):
    linear in recall between the last point below the target and the first at
    or above it. ("reached at the first point" when the smallest ef already
    reaches it: its QPS is then a lower bound; None, "not reached" when no
    point does.)"""
    r = np.asarray(recalls, float)
    q = np.asarray(qps, float)
    at = np.flatnonzero(r >= target)
    if not len(at):
        return None, "not reached"
    j = int(at[0])
    if j == 0:
        return float(q[0]), "reached at the first point"
    r0, r1, q0, q1 = r[j - 1], r[j], q[j - 1], q[j]
    return float(q0 + (target - r0) / (r1 - r0) * (q1 - q0)), "interpolated"


def spread(vals) -> dict:
    v = np.asarray([x for x in vals if x is not None], float)
    if not len(v):
        return {"median": None, "min": None, "max": None, "n": 0}
    return {"median": float(np.median(v)), "min": float(v.min()), "max": float(v.max()),
            "n": int(len(v))}


# -- the run ------------------------------------------------------------------------------

def run(ds, engines: str, out_dir: str, m: int = 16, ef_construction: int = 200,
        ef: list[int] | None = None, rounds: int = 5, build_rounds: int = 1,
        echo=print, ivf: dict | None = None) -> dict:
    """Build every engine, sweep ef (or probes) interleaved query by query, write
    the outputs; returns the summary (the JSON). `ivf`: lists, pq_m, rerank."""
    specs = parse_engines(engines)
    ivf = ivf_settings(ds.rows, ds.dim, **(ivf or {}))
    has_ivf = any(opt in ("ivfpq", "ivfflat") for _, _, opt in specs)
    ef = sorted(set(ef or EF_SWEEP))
    if rounds < 1 or build_rounds < 1:
        raise OptionError("--rounds and --build-rounds must be at least 1")
    if any(e < K for e in ef) and not has_ivf:
        raise OptionError(f"every ef must be at least {K} (the top-{K} is asked for)")
    os.makedirs(out_dir, exist_ok=True)
    train, test, truth = ds.train, ds.test, ds.neighbors[:, :K]
    n, dim = train.shape
    work = tempfile.mkdtemp(prefix="ab-", dir=out_dir)
    labels = [s[0] for s in specs]
    ref = next((s[0] for s in specs if s[1] != "varvedb"), labels[0])
    eng = {}
    try:
        for label, kind, option in specs:
            wd = os.path.join(work, label.replace(":", "-"))
            os.makedirs(wd, exist_ok=True)
            if kind == "varvedb":
                eng[label] = VarveAB(label, dim, ds.metric, wd, option, ivf)
            elif option == "ivfpq":
                eng[label] = FaissIvfAB(label, dim, ds.metric, wd, ivf)
            else:
                eng[label] = KINDS[kind](label, dim, ds.metric, wd)
        builds = _builds(eng, train, m, ef_construction, build_rounds)
        queries = {label: (eng[label].prepare(test) if isinstance(eng[label], FaissAB)
                           else test) for label in labels}
        sizes = {}
        for label in labels:
            g = eng[label].graph_bytes()
            v = eng[label].vector_bytes(n)
            sizes[label] = {"build_threads": eng[label].build_threads,
                            "graph_bytes_per_vector": g / n,
                            "memory_bytes_per_vector": (g + v) / n}
        sweep = _sweep(eng, labels, queries, truth, ef, rounds)
        notes = {label: eng[label].note for label in labels}
    finally:
        for e in eng.values():
            e.close()
        shutil.rmtree(work, ignore_errors=True)

    summary = _summarize(ds, labels, ref, m, ef_construction, ef, rounds, build_rounds,
                         builds, sizes, sweep, notes)
    if has_ivf:
        summary["config"]["ivf"] = ivf
    report.write_outputs(summary, os.path.join(out_dir, f"ab-{ds.name}-{n}x{dim}"),
                         markdown, plot, echo)
    return summary


def _builds(eng: dict, train, m, ef_construction, build_rounds) -> dict:
    labels = list(eng)
    times = {label: [] for label in labels}
    for label in labels:
        eng[label].warm(train, m, ef_construction)
    with tqdm(total=build_rounds * len(labels), desc="build", unit="index") as bar:
        for r in range(build_rounds):
            for label in (labels if r % 2 == 0 else labels[::-1]):
                bar.set_postfix_str(label)
                gc.collect()
                times[label].append(eng[label].build(train, m, ef_construction))
                bar.update()
    return times


def _sweep(eng: dict, labels: list[str], queries: dict, truth, ef: list[int],
           rounds: int) -> dict:
    """{ef: {label: (ns per query (rounds, q) int64, ids of round 0)}}."""
    nq = len(truth)
    out = {}
    with tqdm(total=len(ef) * rounds * nq, desc="ef sweep", unit="query") as bar:
        for e in ef:
            bar.set_postfix_str(f"ef={e}")
            for label in labels:
                eng[label].set_ef(e)
                for q in queries[label][:WARMUP]:      # JIT compiles, a changed setting
                    eng[label].search(q)
            ns = {label: np.zeros((rounds, nq), np.int64) for label in labels}
            found = {label: [None] * nq for label in labels}
            search = {label: eng[label].search for label in labels}
            qs = {label: list(queries[label]) for label in labels}
            clock = time.perf_counter_ns
            for r in range(rounds):
                gc.collect()
                for i in range(nq):
                    s = i % len(labels)
                    for label in labels[s:] + labels[:s]:
                        fn, q = search[label], qs[label][i]
                        t = clock()
                        ids = fn(q)
                        ns[label][r, i] = clock() - t
                        if r == 0:
                            found[label][i] = ids
                bar.update(nq)
            out[e] = {label: (ns[label], found[label]) for label in labels}
    return out


def _summarize(ds, labels, ref, m, ef_construction, ef, rounds, build_rounds, builds, sizes,
               sweep, notes) -> dict:
    nq = len(ds.test)
    engines = {}
    for label in labels:
        curve = []
        for e in ef:
            ns, found = sweep[e][label]
            per_round = [nq / (ns[r].sum() / 1e9) for r in range(rounds)]
            lat = ns.ravel() / 1000
            curve.append({
                "ef": e,
                "recall": data.recall([np.asarray(f, np.int64) for f in found],
                                      ds.neighbors[:, :K]),
                "qps": spread(per_round), "qps_per_round": per_round,
                "p50_us": float(np.percentile(lat, 50)), "p99_us": float(np.percentile(lat, 99)),
            })
        engines[label] = {"build_s": spread(builds[label]) | {"per_round": builds[label]},
                          **sizes[label], "curve": curve, "note": notes[label]}
    for label in labels:
        e = engines[label]
        rc = [p["recall"] for p in e["curve"]]
        med = [p["qps"]["median"] for p in e["curve"]]
        e["build_ratio_to_reference"] = spread(
            np.array(builds[label]) / np.array(builds[ref]))
        for p, pr in zip(e["curve"], engines[ref]["curve"], strict=True):
            p["qps_ratio_to_reference"] = spread(
                np.array(p["qps_per_round"]) / np.array(pr["qps_per_round"]))
        at = {}
        for t in TARGETS:
            value, status = qps_at_recall(rc, med, t)
            per_round = [qps_at_recall(rc, [p["qps_per_round"][r] for p in e["curve"]], t)[0]
                         for r in range(rounds)]
            at[f"{t:.2f}"] = {"qps": value, "status": status, "qps_per_round": per_round}
        e["qps_at_recall"] = at
    for label in labels:
        for t, point in engines[label]["qps_at_recall"].items():
            mine, theirs = point, engines[ref]["qps_at_recall"][t]
            ratio = (mine["qps"] / theirs["qps"]
                     if mine["qps"] is not None and theirs["qps"] is not None else None)
            rounds_ = [a / b if a is not None and b is not None else None
                       for a, b in zip(mine["qps_per_round"], theirs["qps_per_round"],
                                       strict=True)]
            point["ratio_to_reference"] = ratio
            point["ratio_to_reference_per_round"] = spread(rounds_)
    return {
        "config": {"dataset": ds.name, "source": ds.source, "rows": ds.rows, "dim": ds.dim,
                   "queries": nq, "metric": ds.metric, "k": K, "m": m,
                   "ef_construction": ef_construction, "ef": ef, "rounds": rounds,
                   "build_rounds": build_rounds, "build_threads": BUILD_THREADS,
                   "query_threads": 1, "engines": labels, "reference": ref,
                   "targets": list(TARGETS)},
        "machine": {"when": time.strftime("%Y-%m-%d %H:%M"), "cpus": os.cpu_count(),
                    "python": platform.python_version(), "platform": platform.platform()},
        "engines": engines,
    }


# -- outputs --------------------------------------------------------------------------------

def _fmt(s: dict, fmt: str) -> str:
    if s is None or s.get("median") is None:
        return "–"
    if s["n"] > 1 and s["min"] != s["max"]:
        return f"{fmt.format(s['median'])} ({fmt.format(s['min'])}–{fmt.format(s['max'])})"
    return fmt.format(s["median"])


def markdown(summary: dict) -> str:
    cfg, engines = summary["config"], summary["engines"]
    labels, ref = cfg["engines"], cfg["reference"]
    lines = [f"### A/B in one process: {cfg['dataset']}, {cfg['rows']:,} x {cfg['dim']}, "
             f"{cfg['metric']}, {cfg['queries']:,} queries; HNSW m={cfg['m']} "
             f"ef_construction={cfg['ef_construction']}",
             "", f"{cfg['source']}. Queries one at a time on one thread, interleaved query by "
             f"query; medians (min–max) of {cfg['rounds']} rounds; ratios against {ref}, "
             f"per round. {summary['machine']['cpus']} cores, {summary['machine']['when']}.",
             "", "| engine | build s | build vs " + ref + " | graph B/vector "
             "| memory B/vector (vectors + graph) |", "|---|---|---|---|---|"]
    for label in labels:
        e = engines[label]
        lines.append(f"| {label} | {_fmt(e['build_s'], '{:.2f}')} on {e['build_threads']} "
                     f"threads | "
                     f"{_fmt(e['build_ratio_to_reference'], '{:.2f}x')} | "
                     f"{e['graph_bytes_per_vector']:,.0f} | {e['memory_bytes_per_vector']:,.0f} |")
    lines += ["", "QPS at equal recall@10 (interpolated on each curve):", "",
              "| engine | " + " | ".join(f"QPS at {t}" for t in engines[labels[0]]
                                         ["qps_at_recall"]) + " |",
              "|---" * (1 + len(cfg["targets"])) + "|"]
    for label in labels:
        cells = []
        for point in engines[label]["qps_at_recall"].values():
            if point["qps"] is None:
                cells.append("not reached")
                continue
            c = f"{point['qps']:,.0f}"
            if point["status"] != "interpolated":
                c += " (≥, first point)"
            if label != ref and point["ratio_to_reference"] is not None:
                c += (f"; {point['ratio_to_reference']:.2f}x "
                      f"[{_fmt(point['ratio_to_reference_per_round'], '{:.2f}')}]")
            cells.append(c)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "The sweep:", "",
              "| ef | " + " | ".join(f"{x} recall | {x} QPS | {x} p50/p99 µs" for x in labels)
              + " | " + " | ".join(f"{x}/{ref}" for x in labels if x != ref) + " |",
              "|---" * (1 + 3 * len(labels) + len(labels) - 1) + "|"]
    for i, ef in enumerate(cfg["ef"]):
        cells = []
        for label in labels:
            p = engines[label]["curve"][i]
            cells += [f"{p['recall']:.3f}", _fmt(p["qps"], "{:,.0f}"),
                      f"{p['p50_us']:,.0f} / {p['p99_us']:,.0f}"]
        cells += [_fmt(engines[label]["curve"][i]["qps_ratio_to_reference"], "{:.2f}x")
                  for label in labels if label != ref]
        lines.append(f"| {ef} | " + " | ".join(cells) + " |")
    lines += ["", "<details><summary>How each engine was driven</summary>", ""]
    lines += [f"- {label}: `{engines[label]['note']}`" for label in labels]
    lines += ["", "</details>"]
    return "\n".join(lines) + "\n"


def plot(summary: dict, path: str) -> str | None:
    """Recall@10 against QPS (log) per engine, the interpolated points marked."""
    plt = report.pyplot()
    if plt is None:
        return report.NO_MATPLOTLIB
    cfg = summary["config"]
    fig, ax = plt.subplots(figsize=(7.5, 5))
    for label, e in summary["engines"].items():
        pts = e["curve"]
        line, = ax.plot([p["recall"] for p in pts], [p["qps"]["median"] for p in pts],
                        marker="o", label=label)
        for p in pts:
            ax.annotate(str(p["ef"]), (p["recall"], p["qps"]["median"]),
                        textcoords="offset points", xytext=(4, 4), fontsize=7,
                        color=line.get_color())
        at = [(float(t), v["qps"]) for t, v in e["qps_at_recall"].items()
              if v["status"] == "interpolated"]
        if at:
            ax.plot([a[0] for a in at], [a[1] for a in at], marker="x", linestyle="none",
                    markersize=9, color=line.get_color())
    for t in cfg["targets"]:
        ax.axvline(t, color="grey", alpha=0.3, linewidth=0.8)
    return report.save_curves(
        plt, fig, ax, path,
        f"A/B in one process: {cfg['dataset']} {cfg['rows']:,} x {cfg['dim']} "
        f"{cfg['metric']}, m={cfg['m']} ef_construction={cfg['ef_construction']} "
        "(labels: ef; x: interpolated)")
