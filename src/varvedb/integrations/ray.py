"""Ray Data over varvedb collections (extra: `varvedb[ray]`; the README's "Ray").

    from varvedb.integrations.ray import VarveDatasink, build_index, read_varve
    ds = read_varve("docs.varve", "docs", columns=["title", "vec"], where="year > $1",
                    params=[2020])                  # or a server's URL: vv.Client's
    ds.map_batches(enrich).write_datasink(VarveDatasink("out.varve", "docs"))
    build_index("out.varve", "docs", "vec", vv.IVFPQ(lists=256, pq_m=16))

`read_varve`: a Ray Data `Datasource`. The version is pinned when the dataset is
planned (the newest, or `as_of`), the rows that match `where` at that version
are counted and split into row ranges, one `ReadTask` each; a task opens the
file read-only (or the server through `vv.Client`) and reads its range at the
pinned version with the filter and the columns pushed down (`find` with
offset and limit), answering one Arrow table: `id` and the columns, a vector
a fixed-size-list column. A commit made while the job runs changes nothing it
reads.

`VarveDatasink`: `Dataset.write_datasink(VarveDatasink(path, collection))`.
Each write task writes its rows as one Arrow IPC file in a folder of the job
beside the target (`<path>.ray-<hex>/`); `on_write_complete`, on the driver,
applies them all in ONE transaction through the bulk path (`insert`, or
`upsert` with mode="upsert"), so the target gains every row or none: a task
that raises, a failed commit (a duplicate id in append mode, a value the
schema refuses) or `on_write_failed` leave the file as it was, and the
folder is removed in every case. Only the files the tasks' results name
are applied: what a failed attempt of a retried task left is not. A collection that does not exist is made
in that same commit from the first side file's types (schema_inference, as
`varvedb import` and `create_collection(data=)` make one). Ray tensor columns are written as
fixed-size lists, the form `insert` takes a vector field's block in (rows of several
shapes as lists, which insert refuses naming a row's width); a column Ray keeps as
pickled Python values (values of mixed types) is written as it is, and insert
refuses what its field refuses, so a bad row fails the job with the error insert
gives for it. The
target is opened for writing only at the end, on the driver: no other
process may hold it for writing then (varvedb has one writer).

`build_index`: an IVF-PQ index built with Ray: the driver opens the file,
trains the coarse centroids and the PQ codebooks on the index's seeded
sample (IvfIndex.train, as the single-process build does), then the rows are
encoded in row ranges by Ray tasks (IvfIndex.encode_rows, the same kernels;
`parts` below) and the index is created in one commit, filled, and saved in
one checkpoint. A row's code depends on that row alone, so the index equals
the one the maintainer builds in one process from the same rows and seed.

`ShardedCollection` (integrations/sharded.py) is importable from here as well.

`import varvedb` imports none of this; this module imports Ray.
"""
from __future__ import annotations

import math
import os
import shutil
import uuid

import numpy as np
import pyarrow as pa
import ray
from ray.data import Datasink, Datasource, ReadTask
from ray.data.block import BlockAccessor, BlockMetadata
from ray.data.extensions import ArrowTensorType, ArrowTensorTypeV2, ArrowVariableShapedTensorType

from ..errors import OptionError
from ..schema import brief
from ..schema_inference import infer_schema
from .sharded import ShardedCollection    # here too: the name issue 33 gave it

__all__ = ["ShardedCollection", "VarveDatasink", "VarveDatasource", "build_index",
           "read_varve"]

MODES = ("append", "upsert")
MIN_PART_ROWS = 4096      # build_index: rows a Ray task encodes, at least; and
                          # read_varve's rows a task reads, unless parallelism= says
SIDE_SUFFIX = ".arrow"


# ---- reading -------------------------------------------------------------------------

def _is_url(source) -> bool:
    return isinstance(source, str) and source.startswith(("http://", "https://"))


def _open(source, token):
    """The embedded file read-only, or the server at a URL."""
    import varvedb as vv
    if _is_url(source):
        return vv.Client(source, token=token)
    return vv.connect(source, readonly=True)


def _check_source(source) -> None:
    if not (_is_url(source) or isinstance(source, (str, os.PathLike))) or \
            str(source) in ("", ":memory:"):
        raise OptionError(f"a varvedb file's path or a server's http(s) URL, got "
                          f"{brief(source)}")


class VarveDatasource(Datasource):
    """One version of a collection's matching rows, split into row ranges (see the
    module docstring). Planned (version pinned, rows counted, `where` and `columns`
    checked) when made."""

    def __init__(self, source, collection: str, columns=None, where=None, params=(),
                 as_of=None, token: str | None = None, parallelism: int | None = None):
        super().__init__()
        self.parallelism = parallelism      # None: Ray's, bounded by MIN_PART_ROWS
        _check_source(source)
        self.source = source if _is_url(source) else os.path.abspath(source)
        self.collection, self.where, self.params = collection, where, tuple(params)
        self.token = token
        src = _open(self.source, token)
        try:
            coll = src.collection(collection)
            self.version = src.version if as_of is None else as_of
            self.columns = list(coll.schema.fields) if columns is None else list(columns)
            # the filter and the columns checked here, on the driver: a typed error now
            coll.find(where, self.params, as_of=self.version, limit=0, select=self.columns)
            self.rows = coll.count(where, self.params, as_of=self.version)
        finally:
            src.close()

    def estimate_inmemory_data_size(self) -> int | None:
        return None

    def get_name(self) -> str:
        return "Varve"

    def get_read_tasks(self, parallelism: int, per_task_row_limit=None,
                       data_context=None) -> list[ReadTask]:
        n = self.rows
        if self.parallelism is None:    # each task's open and plan is worth its rows
            parallelism = min(int(parallelism), math.ceil(n / MIN_PART_ROWS))
        parts = max(1, min(int(parallelism), n))
        bounds = np.linspace(0, n, parts + 1).astype(np.int64)
        tasks = []
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            if hi <= lo and n:
                continue        # no rows: one task answers the columns, empty
            meta = BlockMetadata(num_rows=hi - lo, size_bytes=None, input_files=None,
                                 exec_stats=None)
            tasks.append(ReadTask(lambda lo=lo, hi=hi: [self.read_range(lo, hi)], meta,
                                  per_task_row_limit=per_task_row_limit))
        return tasks

    def read_range(self, lo: int, hi: int) -> pa.Table:
        """The matching rows [lo, hi) at the pinned version, as an Arrow table."""
        src = _open(self.source, self.token)
        try:
            hits = src.collection(self.collection).find(
                self.where, self.params, as_of=self.version, offset=lo, limit=hi - lo,
                select=self.columns)
            return hits.to_arrow().drop_columns(["score"])
        finally:
            src.close()


def read_varve(path_or_url, collection: str, columns=None, where=None, params=(),
               as_of=None, parallelism: int = -1, token: str | None = None):
    """A Ray Dataset of a collection's documents at one version (the newest, or
    `as_of`: a version number or an aware datetime): `id` and `columns` (None:
    every field), the rows matching `where` (with `params`), in insertion order
    across the blocks. `parallelism`: the number of read tasks (-1: Ray's choice,
    at most one per MIN_PART_ROWS rows).
    `path_or_url`: a file (opened read-only by each task) or a server's URL
    (`token` its bearer token)."""
    if parallelism in (-1, None):
        parallelism = None
    elif type(parallelism) is not int or parallelism < 1:
        raise OptionError(f"parallelism is a positive int or -1, got {brief(parallelism)}")
    ds = VarveDatasource(path_or_url, collection, columns, where, params, as_of, token,
                         parallelism)
    return ray.data.read_datasource(ds, override_num_blocks=parallelism)


# ---- writing -------------------------------------------------------------------------

def plain_arrow(table: pa.Table) -> pa.Table:
    """`table` with each Ray tensor column as one `insert` reads a vector field's
    block from: fixed-shape rows a fixed-size-list column of their flattened
    values, rows of several shapes a list column of them (each row its own width,
    which insert names when it refuses one). Ray's column of pickled Python values
    (values of mixed types) stays: insert reads its values and refuses what its
    field refuses (treated as a tensor, it raised pyarrow's ArrowInvalid)."""
    for i, field in enumerate(table.schema):
        if isinstance(field.type, ArrowVariableShapedTensorType):
            column = pa.chunked_array([c.storage.field("data") for c in table.column(i).chunks],
                                      field.type.storage_type.field("data").type)
        elif isinstance(field.type, (ArrowTensorType, ArrowTensorTypeV2)):
            chunks = [np.asarray(c.to_numpy()) for c in table.column(i).chunks]
            block = np.concatenate(chunks) if chunks else np.empty((0, 0))
            block = block.reshape(len(block), -1)
            column = pa.FixedSizeListArray.from_arrays(pa.array(block.reshape(-1)),
                                                       block.shape[1])
        else:
            continue
        table = table.set_column(i, pa.field(field.name, column.type), column)
    return table


class VarveDatasink(Datasink):
    """Rows written to a collection in one commit at the end of the job (see the
    module docstring). mode: "append" (insert: an id taken fails the job) or
    "upsert" (each row merged into the live document with its id, or inserted)."""

    def __init__(self, path, collection: str, mode: str = "append"):
        _check_source(path)
        if _is_url(path):
            raise OptionError("VarveDatasink writes a file on this machine's disks, not a "
                              f"server: got {path!r}")
        if mode not in MODES:
            raise OptionError(f"mode is one of {MODES}, got {brief(mode)}")
        if not isinstance(collection, str) or not collection:
            raise OptionError(f"a collection's name, got {brief(collection)}")
        self.path = os.path.abspath(path)
        self.collection, self.mode = collection, mode
        self.job_dir = f"{self.path}.ray-{uuid.uuid4().hex}"

    def on_write_start(self, schema=None) -> None:
        os.mkdir(self.job_dir)      # the tasks never make it: once removed, they fail

    def write(self, blocks, ctx):
        """This task's rows as one side file; (name, rows), or None when it had none."""
        tables = [plain_arrow(BlockAccessor.for_block(b).to_arrow()) for b in blocks]
        tables = [t for t in tables if t.num_rows]
        if not tables:
            return None
        table = pa.concat_tables(tables, promote_options="default")
        name = f"part-{ctx.task_idx:06d}-{uuid.uuid4().hex[:8]}{SIDE_SUFFIX}"
        final = os.path.join(self.job_dir, name)
        with pa.OSFile(final + ".tmp", "wb") as out, \
                pa.ipc.new_file(out, table.schema) as writer:
            writer.write_table(table)
        os.rename(final + ".tmp", final)
        return name, table.num_rows

    def on_write_complete(self, write_result) -> None:
        parts = sorted(r for r in write_result.write_returns if r)
        try:
            if parts:
                self._apply(parts)
        finally:
            shutil.rmtree(self.job_dir, ignore_errors=True)

    def on_write_failed(self, error: Exception) -> None:
        shutil.rmtree(self.job_dir, ignore_errors=True)

    def _apply(self, parts: list) -> None:
        """Every side file into the collection, in one transaction (task order)."""
        import varvedb as vv
        db = vv.connect(self.path)
        try:
            with db.transaction():
                coll = None
                for name, _ in parts:
                    with pa.memory_map(os.path.join(self.job_dir, name)) as source:
                        table = pa.ipc.open_file(source).read_all()
                    if coll is None:
                        if self.collection not in db.collections():
                            db.create_collection(self.collection, infer_schema(table))
                        coll = db.collection(self.collection)
                    if self.mode == "append":
                        coll.insert(table)
                    else:
                        coll.upsert(table)
        finally:
            db.close()


# ---- an IVF-PQ build -----------------------------------------------------------------

@ray.remote
def _encode_part(index, vectors: np.ndarray, norms: np.ndarray) -> tuple:
    return index.encode_rows(vectors, norms, np.arange(len(vectors), dtype=np.int64))


class RayParts:
    """IvfIndex.encode's `parts`: the rows in `tasks` ranges (None: the cluster's
    CPUs; a range holds MIN_PART_ROWS rows at least), each encoded by a Ray task
    that gets the trained centroids and codebooks (IvfIndex.trained_copy, put
    once) and the range's vectors."""

    def __init__(self, tasks: int | None = None):
        if tasks is not None and (type(tasks) is not int or tasks < 1):
            raise OptionError(f"tasks is a positive int or None, got {brief(tasks)}")
        self.tasks = tasks

    def __call__(self, index, vectors: np.ndarray, norms: np.ndarray, rows: np.ndarray):
        tasks = self.tasks or max(1, int(ray.cluster_resources().get("CPU", 1)))
        tasks = max(1, min(tasks, math.ceil(len(rows) / MIN_PART_ROWS)))
        trained = ray.put(index.trained_copy())
        bounds = np.linspace(0, len(rows), tasks + 1).astype(np.int64).tolist()
        refs = [_encode_part.remote(trained, np.ascontiguousarray(vectors[rows[lo:hi]]),
                                    np.ascontiguousarray(norms[rows[lo:hi]]))
                for lo, hi in zip(bounds[:-1], bounds[1:])]
        done = ray.get(refs)
        return tuple(np.concatenate([d[i] for d in done]) for i in range(3))


def build_index(path, collection: str, field: str, index, dataset=None,
                tasks: int | None = None) -> None:
    """Build `index` (a vv.IVFPQ) on `field` with Ray: trained on the driver, the
    rows encoded in `tasks` Ray tasks (None: one per CPU of the cluster), created
    in one commit and saved in one checkpoint (the module docstring). `dataset`:
    a Ray Dataset written into the collection first (VarveDatasink, append).
    With fewer rows than the index trains on (4 per list, 1 024 with pq_m) the
    index is created untrained and built by the maintainer once rows arrive.
    The build runs inside the creating transaction: other writers of the file
    wait for it (their timeout applies), readers do not."""
    import varvedb as vv
    _check_source(path)
    if not isinstance(index, vv.IVFPQ):
        raise OptionError(f"build_index builds a vv.IVFPQ index, got {brief(index)}")
    parts = RayParts(tasks)
    if dataset is not None:
        dataset.write_datasink(VarveDatasink(path, collection))
    db = vv.connect(path)
    try:
        db.collection(collection).create_index(field, index, parts=parts)
        db.checkpoint()
    finally:
        db.close()
