"""Checkpoints: the engine's state as of one version, written so open can map it.

A checkpoint is one record (see storage/record.py) holding every table's
row-version arrays, columns, scalar and vector indexes, and the history.
Vector arenas are usually not copied: when a field's rows already lie in the
log in at most MAX_EXTENTS runs (a bulk load), the checkpoint lists those
runs and open maps them (several runs are joined into one array in memory at
open). An arena of CONSOLIDATE_BYTES or more is written whole instead
unless it is one run already, so that open maps it and never copies it: a
file larger than memory is then read page by page, not loaded (a bulk load
in blocks made a 200 000 x 128 open take 135 MB, and a capped reader was
killed for it). The price: a checkpoint after new rows writes such an arena
again; vacuum reclaims the old copies. Open turns every array into a read-only view of the
mapped file; nothing is rebuilt and nothing is copied until it is written.

Open checks what it maps, as replay checks frames (frames.py): every array
has its table's n rows and its dtype, extents are aligned in-order runs in
the log before the checkpoint, dictionaries and codes agree, the history is
increasing and ends at the superblock's version and chain, the vectors of an
indexed field are finite (one pass over that arena: the graph kernels need
it), and a graph whose arrays do not fit is rebuilt; the rest of a graph's
check (its links) runs at its first use (VectorIndex.check_loaded), and one
that fails it is rebuilt then. Anything else raises
CorruptFileError, and open replays the log instead: a checkpoint is only a
shortcut. `load` returns the state (`CheckpointState`) and the engine adopts
it; neither `encode` nor `load` knows the engine.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .. import sparse
from ..errors import CorruptFileError, SchemaError
from ..schema import (VECTOR_DTYPES, Schema, all_finite, brief, timestamps_readable,
                      validate_name)
from ..storage import format as F
from ..storage import record
from .branches import MAIN, Branch, Catalog
from .columns import Growable, JsonColumn, TextColumn, VectorColumn
from .frames import APPLY_ERRORS, INT64_MAX, SCALAR_DTYPES, all_of_types, array_of, int_of
from .history import Commit
from .rowmap import RowMap
from .table import ALIVE, Table

HASH_APART = 4 << 20   # a checkpoint payload this large is hashed beside its decoding
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count()
                                                                                 or 1)
MAP_FROM = 1 << 20   # arrays this large are never compressed in a checkpoint: they are mapped
MAX_EXTENTS = 64   # more runs than this and the arena is written whole instead
CONSOLIDATE_BYTES = 64 << 20   # an arena this large is mapped as one run, never joined


@dataclass
class CheckpointState:
    """What a checkpoint holds: the state as of `version`, for the engine to adopt."""
    version: int
    tables: dict[int, Table]
    names: dict[str, int]        # collection name -> cid
    history: list[Commit]
    next_cid: int                # above every cid used, dropped collections' too
    catalog: Catalog             # the branches (branches.py)


def encode(tables: dict[int, Table], history: list[Commit], version: int, at: int,
           next_cid: int | None = None, catalog: Catalog | None = None
           ) -> tuple[list, int, Callable[[], None]]:
    """(parts, length, adopt): the payload of a checkpoint of `tables` and `history`
    as of `version`, whose frame will start at file offset `at`, and what to call
    once it is durable — nothing in memory changes before, so a failed write
    leaves the state as it was."""
    meta: dict = {"version": version, "tables": [],
                  "next_cid": max(tables, default=0) + 1 if next_cid is None else next_cid}
    if catalog is not None and catalog.any:
        meta["branches"] = catalog.to_list()
    arrays: dict[str, np.ndarray] = {}
    packable: set[str] = set()     # compressed where it pays: never vectors or indexes, nor
                                   # arrays of MAP_FROM bytes or more
    copied: list[tuple[VectorColumn, str]] = []
    for cid, t in tables.items():
        p = f"{cid}."
        tm = {"cid": cid, "name": t.name, "schema": t.schema.to_dict(), "created": t.created,
              "n": t.n, "next_int_id": t.next_int_id, "columns": {}, "extents": {},
              "vector_indexes": {}}
        if t.rowmap is not None:
            tm["log_base"] = t.rowmap.log_base
            arrays[p + "rowmap"] = t.rowmap.kept
        arrays[p + "born"] = t.born.view()
        arrays[p + "died"] = t.died.view()
        if isinstance(t.ids, TextColumn):
            arrays[p + "ids"] = t.ids.codes.view()
            tm["id_words"] = t.ids.words
        else:
            arrays[p + "ids"] = t.ids.view()
        packable.update((p + "born", p + "died", p + "ids"))
        if t.branch_of is not None:
            arrays[p + "branch"] = t.branch_of.view()
            packable.add(p + "branch")
        tm["deaths"] = sorted(t.deaths)
        for b, (rows, versions) in t.deaths.items():
            arrays[f"{p}deaths.{b}.rows"] = rows.view()
            arrays[f"{p}deaths.{b}.versions"] = versions.view()
            packable.update((f"{p}deaths.{b}.rows", f"{p}deaths.{b}.versions"))
        for name, col in t.columns.items():
            for k, a in col.to_arrays().items():
                arrays[f"{p}{name}.{k}"] = a
                if not isinstance(col, VectorColumn):
                    packable.add(f"{p}{name}.{k}")
            if hasattr(col, "meta"):
                tm["columns"][name] = col.meta()
            if isinstance(col, VectorColumn):
                big = col.arena.n * col.field.bytes_per_vector >= CONSOLIDATE_BYTES
                if len(col.extents) <= (1 if big else MAX_EXTENTS) \
                        and col.covered_by_extents():
                    tm["extents"][name] = col.extents
                else:
                    arrays[f"{p}{name}.arena"] = col.arena.view()
                    copied.append((col, f"{p}{name}.arena"))
        # a field has one index of each family, and its further vector indexes
        # under "field@name"
        for name, ix in t.index_items():
            if ix.PREFIX == "vx":
                tm["vector_indexes"][name] = True
            for k, a in ix.to_arrays().items():
                arrays[f"{p}{ix.PREFIX}.{name}.{k}"] = a
        meta["tables"].append(tm)
    h = history
    arrays["h.version"] = np.fromiter((c.version for c in h), np.int64, len(h))
    arrays["h.ts"] = np.fromiter((c.timestamp_us for c in h), np.int64, len(h))
    arrays["h.rows"] = np.fromiter((c.rows_changed for c in h), np.int64, len(h))
    arrays["h.chain"] = np.frombuffer(b"".join(c.chain for c in h), np.uint8).reshape(len(h), 32)
    if any(c.branch for c in h):
        arrays["h.branch"] = np.fromiter((c.branch for c in h), np.int64, len(h))
    # A large array stays raw even so: open maps it, and a reader under a memory cap
    # can drop its pages, where a decompressed copy would be anonymous memory.
    packable = {k for k in packable if arrays[k].nbytes < MAP_FROM}
    parts, length, offsets = record.encode(meta, arrays, packed=packable.__contains__)
    # Once written, a copied arena is one run in the file: later checkpoints refer to it.
    payload_at = at + F.FRAME_HEADER_SIZE
    runs = [(col, [[0, col.arena.n, payload_at + offsets[key]]]) for col, key in copied]

    def adopt() -> None:
        for col, extents in runs:
            col.extents = extents
    return parts, length, adopt


def load(mv, offset: int, sb: F.Superblock | None = None) -> CheckpointState:
    """The tables and history of the checkpoint frame at offset in the mapped file mv.

    Raises CorruptFileError when the frame is damaged or what it holds does not
    fit together (checked below, before anything is built from it); `sb`, the
    superblock that names it, must agree on its version, chain and end. The
    caller then replays the log instead."""
    try:
        return _load(mv, offset, sb)
    except CorruptFileError:
        raise
    except APPLY_ERRORS as e:   # a backstop: what the checks below miss
        raise CorruptFileError(f"the checkpoint at offset {offset} is not valid "
                               f"({type(e).__name__}: {e})") from e


def _load(mv, offset: int, sb: F.Superblock | None) -> CheckpointState:
    hdr = F.unpack_frame_header(mv[offset:offset + F.FRAME_HEADER_SIZE]) \
        if offset >= F.LOG_START and offset % F.ALIGN == 0 else None
    body = offset + F.FRAME_HEADER_SIZE
    if hdr is None or hdr.kind != F.Kind.CHECKPOINT or body + hdr.length > len(mv):
        raise CorruptFileError(f"the checkpoint at offset {offset} is damaged")
    payload = mv[body:body + hdr.length]
    digest = _digest_apart(hdr.kind, hdr.length, payload)
    try:
        state = _build(mv, offset, sb, hdr, body, payload)
    except BaseException:
        if digest() != hdr.digest:   # a damaged frame is reported as that, whatever failed
            raise CorruptFileError(f"the checkpoint at offset {offset} is damaged") from None
        raise
    if digest() != hdr.digest:
        raise CorruptFileError(f"the checkpoint at offset {offset} is damaged")
    return state


def _digest_apart(kind: int, length: int, payload) -> Callable[[], bytes | None]:
    """A function giving the frame hash of a checkpoint's payload. A large one
    (HASH_APART) is hashed on a thread of its own, started now, where a second
    core can take it: SHA-256 runs at ~1 GB/s without the CPU's SHA extensions
    (a 100k x 128 file's ~25 MB of graph: ~25 ms), and hashlib lets the GIL go
    while it hashes, so decoding and checking the payload (which trusts nothing:
    a frame whose hash is good may still come from a hostile writer) runs beside
    it. Nothing decoded is used before the hash is known good; the function
    joins the thread (the payload is a view of the map, which outlives it)."""
    if length < HASH_APART or _CORES < 2:
        d = F.frame_hash(kind, length, [payload])
        return lambda: d
    out: list = []
    th = threading.Thread(target=lambda: out.append(F.frame_hash(kind, length, [payload])),
                          name="varvedb-checkpoint-hash", daemon=True)
    try:
        th.start()
    except RuntimeError:        # no thread to be had (an address-space cap): here, then
        d = F.frame_hash(kind, length, [payload])
        return lambda: d

    def result() -> bytes | None:
        th.join()
        return out[0] if out else None      # (the thread failed: no digest matches None)
    return result


def _build(mv, offset: int, sb: F.Superblock | None, hdr, body: int, payload
           ) -> CheckpointState:
    """The state a checkpoint's payload holds, checked (its hash apart: _load)."""
    if sb is not None and sb.log_end != F.pad(body + hdr.length):
        raise CorruptFileError(f"the superblock says the checkpoint at offset {offset} ends at "
                               f"{sb.log_end}; it ends at {F.pad(body + hdr.length)}")
    meta, arrays, _ = record.decode(payload)
    version = int_of(meta, "version", 0, INT64_MAX)
    if sb is not None and version != sb.checkpoint_version:
        raise CorruptFileError(f"the checkpoint holds version {version}, the superblock "
                               f"says {sb.checkpoint_version}")
    history = _history(arrays, version, sb.chain if sb is not None else None)
    catalog = _catalog(meta.get("branches", []), version)
    if "h.branch" in arrays:
        branches = array_of(arrays, "h.branch", "<i8", (len(history),))
        if not np.isin(branches, list(catalog.by_id)).all():
            raise CorruptFileError("the checkpoint's history names branches it does not hold")
        history = [h + (b,) for h, b in zip(history, branches.tolist())]
    tms = meta.get("tables")
    if not isinstance(tms, list):
        raise CorruptFileError("the checkpoint has no table list")
    tables: dict[int, Table] = {}
    names: dict[str, int] = {}
    for tm in tms:
        t = _load_table(tm, arrays, mv, offset, version, catalog)
        if t.cid in tables or t.name in names:
            raise CorruptFileError(f"the checkpoint holds collection {t.name!r} twice")
        tables[t.cid] = t
        names[t.name] = t.cid
    # absent from checkpoints written before collections could be dropped
    least = max(tables, default=0) + 1
    next_cid = int_of(meta, "next_cid", least, INT64_MAX) if "next_cid" in meta else least
    return CheckpointState(version, tables, names, [Commit(*h) for h in history], next_cid,
                           catalog)


def _catalog(items, version: int) -> Catalog:
    """The branches a checkpoint holds: main and every branch made, each once, each
    forked from one made before it at a version no later than its own first."""
    if not isinstance(items, list):
        raise CorruptFileError(f"the checkpoint's branches are {brief(items)}")
    catalog = Catalog()
    for d in items:
        b = Branch.from_dict(d)
        ok = (type(b.id) is int and isinstance(b.name, str) and all(
            type(x) is int for x in (b.parent, b.fork, b.created, b.dropped))
              and all(type(x) is int for s, vm in b.merged.items() for x in (s, *vm)))
        if b.id == MAIN:
            ok = ok and b.parent == -1
        else:
            ok = ok and b.id not in catalog.by_id and b.parent in catalog.by_id \
                and 0 <= b.fork < b.created <= version and 0 <= b.dropped <= version
        if not ok:
            raise CorruptFileError(f"the checkpoint holds a bad branch {brief(d)}")
        catalog.by_id[b.id] = b
    return catalog


def _history(arrays: dict, version: int, chain: bytes | None) -> list[tuple]:
    """(version, ts, chain, rows) per commit: equal lengths, versions increasing to `version`."""
    vs = array_of(arrays, "h.version", "<i8", None)
    k = len(vs)
    ts = array_of(arrays, "h.ts", "<i8", (k,))
    rows = array_of(arrays, "h.rows", "<i8", (k,))
    chains = array_of(arrays, "h.chain", "|u1", (k, 32))
    if k and (int(vs[0]) < 1 or int(vs[-1]) != version or np.any(vs[1:] <= vs[:-1])):
        raise CorruptFileError(f"the checkpoint's history is not versions 1..{version} "
                               "in order")
    if not timestamps_readable(ts):
        raise CorruptFileError("the checkpoint's history has timestamps outside years 1..9999")
    if k and chain is not None and bytes(chains[-1]) != chain:
        raise CorruptFileError("the checkpoint's history ends at another chain hash "
                               "than the superblock's")
    blob = chains.tobytes()
    return [(v, t, blob[32 * i:32 * i + 32], r) for i, (v, t, r) in
            enumerate(zip(vs.tolist(), ts.tolist(), rows.tolist()))]


def _load_table(tm, arrays: dict, mv, ck_offset: int, version: int, catalog: Catalog
                ) -> Table:
    """One table of the checkpoint, every array checked to have its n rows."""
    if not isinstance(tm, dict):
        raise CorruptFileError(f"a checkpoint table is {brief(tm)}")
    cid = int_of(tm, "cid", 1, INT64_MAX)
    if not isinstance(tm.get("name"), str):
        raise CorruptFileError(f"checkpoint table {cid} is named {brief(tm.get('name'))}")
    try:
        name = validate_name(tm["name"])
        schema = Schema.from_dict(tm.get("schema"))
    except SchemaError as e:
        raise CorruptFileError(f"checkpoint table {cid}: {e}") from None
    t = Table(cid, name, schema, int_of(tm, "created", 0, version))
    n = int_of(tm, "n", 0, INT64_MAX)
    for key in ("columns", "extents", "vector_indexes"):
        if not isinstance(tm.get(key), dict):
            raise CorruptFileError(f"checkpoint table {name!r} has no {key!r} map")
    p = f"{cid}."
    born = array_of(arrays, p + "born", "<i8", (n,))
    died = array_of(arrays, p + "died", "<i8", (n,))
    # every row was born by a commit up to `version`, and died after it was born
    # (or in the same transaction), or not yet
    if n and (int(born.min()) < 1 or int(born.max()) > version
              or np.any((died != ALIVE) & ((died < born) | (died > version)))):
        raise CorruptFileError(f"checkpoint table {name!r} has row versions outside "
                               f"1..{version}")
    t.born = Growable(np.int64, data=born)
    t.died = Growable(np.int64, data=died)
    if p + "branch" in arrays:
        births = array_of(arrays, p + "branch", "<i4", (n,))
        if not np.isin(births, list(catalog.by_id)).all():
            raise CorruptFileError(f"checkpoint table {name!r} has rows of unknown branches")
        t.branch_of = Growable(np.int32, data=births)
    deaths = tm.get("deaths", [])
    # (an item that is no int, a list or a map, is no key of by_id: unhashable)
    if not isinstance(deaths, list) or not all(type(b) is int and b in catalog.by_id
                                               for b in deaths):
        raise CorruptFileError(f"checkpoint table {name!r} has deaths of unknown branches")
    for b in deaths:
        rows = array_of(arrays, f"{p}deaths.{b}.rows", "<i8", None)
        versions = array_of(arrays, f"{p}deaths.{b}.versions", "<i8", rows.shape)
        if len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= n
                          or int(versions.min()) < 1 or int(versions.max()) > version):
            raise CorruptFileError(f"checkpoint table {name!r} has deaths outside its rows "
                                   f"or versions")
        t.deaths[b] = (Growable(np.int64, data=rows), Growable(np.int64, data=versions))
    t.next_int_id = int_of(tm, "next_int_id", 1, INT64_MAX + 1)   # past id 2**63 - 1: none left
    if "log_base" in tm:
        t.rowmap = _rowmap(tm, arrays, p, name, n)
    if isinstance(t.ids, TextColumn):
        words = _words(tm.get("id_words"), f"{name}.id")
        _codes(array_of(arrays, p + "ids", "<i4", (n,)), len(words), 0, f"{name}.id")
        t.ids.load({"codes": arrays[p + "ids"]}, words)
    else:
        t.ids = Growable(np.int64, data=array_of(arrays, p + "ids", "<i8", (n,)))
    for fname, col in t.columns.items():
        f, q = col.field, f"{p}{fname}."
        cm = tm["columns"].get(fname)
        if isinstance(col, VectorColumn):
            norms = array_of(arrays, q + "norms", "<f4", (n,))
            array_of(arrays, q + "nulls", "|b1", (n,))
            col.load({"norms": norms, "nulls": arrays[q + "nulls"]}, None)
            _load_arena(col, f"{name}.{fname}", tm["extents"].get(fname),
                        arrays.get(q + "arena"), mv, n, ck_offset)
            # A graph's kernels need finite vectors and norms (schema.all_finite);
            # an arena no graph walks yet is checked if CREATE_INDEX comes.
            if fname in t.vector_indexes and not (all_finite(norms)
                                                  and all_finite(col.arena.view())):
                raise CorruptFileError(f"vector column {name}.{fname} holds NaN or inf")
        elif isinstance(col, TextColumn):
            words = _words(cm, f"{name}.{fname}")
            _codes(array_of(arrays, q + "codes", "<i4", (n,)), len(words), -1, f"{name}.{fname}")
            col.load({"codes": arrays[q + "codes"]}, words)
        elif isinstance(col, JsonColumn):
            if not isinstance(cm, list) or len(cm) != n or (
                    f.kind == "sparsevec" and not sparse.stored_ok(cm, f.dim)) or (
                    f.kind == "bytes" and not all_of_types(cm, {bytes, type(None)})):
                raise CorruptFileError(f"json column {name}.{fname} has {brief(cm)} "
                                       f"for {n} rows")
            col.load({}, cm)
        else:
            values = array_of(arrays, q + "values", SCALAR_DTYPES[f.kind], (n,))
            if f.kind == "timestamp" and not timestamps_readable(values):
                raise CorruptFileError(f"timestamp column {name}.{fname} holds values "
                                       "outside years 1..9999")
            col.load({"values": values, "nulls": array_of(arrays, q + "nulls", "|b1", (n,))},
                     None)
    for fname, ix in t.indexes.items():
        t.set_index(fname, ix.loaded(_scalar_index(arrays, f"{p}ix.{fname}.", ix, n), n))
    graphs = {label for label, ix in t.index_items() if ix.PREFIX == "vx"}
    for fname in tm["vector_indexes"]:
        if fname not in graphs:
            raise CorruptFileError(f"checkpoint holds a graph of {name}.{brief(fname)}, "
                                   "which has no vector index")
    # a graph or text index that does not fit starts again (Table.load_index)
    for fname, ix in t.index_items():
        if ix.PREFIX != "ix" and (ix.PREFIX != "vx" or fname in tm["vector_indexes"]):
            q = f"{p}{ix.PREFIX}.{fname}."
            sub = {k[len(q):]: a for k, a in arrays.items() if k.startswith(q)}
            ix = t.load_index(fname, ix, sub)
            if ix.PREFIX == "vx":
                ix.checkpointed = ix.linked
    t.committed_n = t.n
    t.drop_live_maps()      # built on first use (Table.live)
    return t


def _load_arena(col: VectorColumn, what: str, extents, arena, mv, n: int,
                ck_offset: int) -> None:
    """The arena: copied into the checkpoint, or runs [first, rows, offset] of the log
    before it, in row order, aligned, and adding up to the table's n rows."""
    dtype = np.dtype(VECTOR_DTYPES[col.field.dtype])
    dim = col.field.width     # arena columns: bit rows are packed bytes
    what = f"vector column {what}"
    if arena is not None:
        if extents is not None:
            raise CorruptFileError(f"{what}: both an arena and extents")
        if arena.dtype != dtype or arena.shape != (n, dim):
            raise CorruptFileError(f"{what}: arena of {arena.dtype} {arena.shape} for {n} rows")
        col.arena = Growable(dtype, (dim,), data=arena)
        return
    if not isinstance(extents, list) or len(extents) > MAX_EXTENTS:
        raise CorruptFileError(f"{what}: extents {brief(extents)}")
    row_bytes = dim * dtype.itemsize
    row = 0
    for e in extents:
        if not (isinstance(e, list) and len(e) == 3 and all(type(x) is int for x in e)):
            raise CorruptFileError(f"{what}: extent {brief(e)}")
        first, count, off = e
        # in order, and inside the log before this checkpoint (Python ints: no overflow)
        if first != row or count < 1 or off < F.LOG_START or off % F.ALIGN \
                or off + count * row_bytes > ck_offset:
            raise CorruptFileError(f"{what}: extent {e} is not the next run of rows "
                                   f"in the log before offset {ck_offset}")
        row += count
    if row != n:
        raise CorruptFileError(f"checkpoint extents hold {row} vectors, table has {n}")
    parts = [np.frombuffer(mv, dtype, count=count * dim, offset=off).reshape(count, dim)
             for _first, count, off in extents]
    data = parts[0] if len(parts) == 1 else (np.concatenate(parts) if parts
                                             else np.empty((0, dim), dtype))
    col.arena = Growable(dtype, (dim,), data=data)
    col.extents = [list(e) for e in extents]


def _rowmap(tm, arrays: dict, p: str, name: str, n: int) -> RowMap:
    """A vacuumed table's map (rowmap.py): k <= n increasing rows below log_base."""
    kept = array_of(arrays, p + "rowmap", "<i8", None)
    base = int_of(tm, "log_base", len(kept), INT64_MAX)
    if len(kept) > n or (len(kept) and (int(kept[0]) < 0 or int(kept[-1]) >= base
                                         or np.any(kept[1:] <= kept[:-1]))):
        raise CorruptFileError(f"checkpoint table {name!r} has a row map that is not "
                               f"increasing rows in [0, {base})")
    return RowMap(kept, base)


def _scalar_index(arrays: dict, q: str, ix, n: int) -> dict:
    """A scalar index's arrays: a sorted run of (key, row) over rows below its bound."""
    keys = array_of(arrays, q + "keys", "<f8" if ix.value_kind == "float" else "<i8", None)
    rows = array_of(arrays, q + "rows", "<i8", keys.shape)
    upto = array_of(arrays, q + "upto", "<i8", (2,))
    sorted_upto, ix_n = int(upto[0]), int(upto[1])
    # (NaN keys sort last; `<` is False for them, so they pass)
    if ix_n != n or not 0 <= sorted_upto <= n or len(keys) > sorted_upto \
            or (len(rows) and (int(rows.min()) < 0 or int(rows.max()) >= sorted_upto)) \
            or np.any(keys[1:] < keys[:-1]):
        raise CorruptFileError(f"scalar index {q[:-1]!r} does not fit its {n} rows")
    return {"keys": keys, "rows": rows, "upto": upto}


def _words(words, what: str) -> list:
    """A text dictionary: distinct strings."""
    if not isinstance(words, list) or not all_of_types(words, {str}) \
            or len(set(words)) != len(words):
        raise CorruptFileError(f"text column {what} has dictionary {brief(words)}")
    return words


def _codes(codes: np.ndarray, n_words: int, low: int, what: str) -> None:
    if len(codes) and (int(codes.min()) < low or int(codes.max()) >= n_words):
        raise CorruptFileError(f"text column {what} has codes outside its "
                               f"{n_words}-word dictionary")


def differs(ck: CheckpointState, log: CheckpointState) -> str | None:
    """What a checkpoint holds that the log, replayed to the same version, does not
    (None: the same state). `verify` asks it of every checkpoint a superblock
    names: a checkpoint's own hash proves only that it was not damaged, and
    anyone can recompute it; the hash-chained log is the truth.

    Compared: the collections, their schemas and index kinds, every row's id,
    versions, branch, deaths and values (text by its words, arrays bit for bit),
    the row maps, the history, the branches. Not compared:
    what open derives and rebuilds when it does not fit (HNSW graphs, full-text
    postings, scalar index runs): the log does not fix them."""
    if ck.names != log.names or ck.next_cid != log.next_cid:
        return f"collections {sorted(ck.names)} (next id {ck.next_cid}), the log's " \
               f"{sorted(log.names)} (next id {log.next_cid})"
    if _history_rows(ck.history) != _history_rows(log.history):
        return "its history"
    if ck.catalog.to_list() != log.catalog.to_list():
        return "its branches"
    for cid, t in ck.tables.items():
        mine, theirs = dict(_table_facts(t)), dict(_table_facts(log.tables[cid]))
        for key, value in mine.items():
            if key not in theirs or not _same(value, theirs[key]):
                return f"{t.name}: {key}"
        if mine.keys() != theirs.keys():
            return f"{t.name}: {sorted(set(theirs) - set(mine))[:1]}"
    return None


def _history_rows(history: list[Commit]) -> list[tuple]:
    return [(c.version, c.timestamp_us, bytes(c.chain), c.rows_changed, c.branch)
            for c in history]


def _table_facts(t: Table):
    """(what, value) of everything a table's rows are read from."""
    n = t.n
    yield "name", t.name
    yield "schema", t.schema.to_dict()
    yield "created", t.created
    yield "rows", n
    yield "next_int_id", t.next_int_id
    yield "index kinds", sorted((f, ix.kind) for f, ix in t.index_items())
    yield "born", t.born.view()
    yield "died", t.died.view()
    yield "ids", _Text(t.ids) if isinstance(t.ids, TextColumn) else t.ids.view()
    yield "branch", None if t.branch_of is None else t.branch_of.view()
    for b, (rows, versions) in sorted(t.deaths.items()):
        yield f"deaths on branch {b}", (rows.view(), versions.view())
    if t.rowmap is not None:
        yield "row map", (t.rowmap.log_base, t.rowmap.kept)
    for name, col in t.columns.items():
        if isinstance(col, VectorColumn):
            yield f"{name} (vectors)", col.arena.view()
            yield f"{name} (norms)", col.norms.view()
            yield f"{name} (nulls)", col.nulls.view()
        elif isinstance(col, TextColumn):
            yield name, _Text(col)
        elif isinstance(col, JsonColumn):
            yield name, col.items[:col.n]
        else:
            yield name, col.values.view()
            yield f"{name} (nulls)", col.nulls.view()


class _Text:
    """A text column's rows, equal to another's when every row holds the same
    string (or null), whatever the dictionaries: a live writer's keeps the words
    of rows it rolled back, a replay's does not."""

    def __init__(self, col: TextColumn):
        self.words, self.codes = col.words, col.codes.view()

    def values(self) -> np.ndarray:
        return np.array(self.words + [None], dtype=object)[self.codes]   # -1: None

    def __eq__(self, other) -> bool:
        if self.words == other.words:           # the usual case: compare the codes
            return _same(self.codes, other.codes)
        return _same(self.values(), other.values())


_COMPARE_BYTES = 1 << 20   # arrays are compared a slice of this many bytes at a time


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        if a.dtype == object:
            return bool(np.array_equal(a, b))
        # bit for bit (both hold the log's bytes: NaN is itself, -0.0 is not 0.0), a
        # slice at a time so that the comparison's own arrays stay small
        x = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
        y = np.ascontiguousarray(b).reshape(-1).view(np.uint8)
        return all(np.array_equal(x[i:i + _COMPARE_BYTES], y[i:i + _COMPARE_BYTES])
                   for i in range(0, len(x), _COMPARE_BYTES))
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, list) and isinstance(b, list):
        # json values: == first (C speed); NaN is not equal to itself, so a
        # mismatch is looked at again value by value, by its repr
        return a == b or (len(a) == len(b) and all(
            x == y or repr(x) == repr(y) for x, y in zip(a, b)))
    return a == b
