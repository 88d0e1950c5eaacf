"""Checkpoints: the engine's state as of one version, written so open can map it.

A checkpoint is one record (see storage/record.py) holding every table's
row-version arrays, columns, scalar and vector indexes, and the history.
Vector arenas are usually not copied: when a field's rows already lie in the
log in at most MAX_EXTENTS runs (a bulk load), the checkpoint lists those
runs and open maps them. Open turns every array into a read-only view of the
mapped file; nothing is rebuilt and nothing is copied until it is written.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..errors import CorruptFileError
from ..schema import VECTOR_DTYPES, Schema
from ..storage import format as F
from ..storage import record
from .columns import Growable, TextColumn, VectorColumn
from .table import ALIVE, Table

MAX_EXTENTS = 64   # more runs than this and the arena is written whole instead


def encode(engine) -> tuple[list, int, Callable[[], None]]:
    """(parts, length, adopt): the checkpoint's payload, and what to call once it
    is durable — nothing in memory changes before, so a failed write leaves the
    state as it was."""
    meta: dict = {"version": engine.written, "tables": []}
    arrays: dict[str, np.ndarray] = {}
    copied: list[tuple[VectorColumn, str]] = []
    for cid, t in engine.tables.items():
        p = f"{cid}."
        tm = {"cid": cid, "name": t.name, "schema": t.schema.to_dict(), "created": t.created,
              "n": t.n, "next_int_id": t.next_int_id, "columns": {}, "extents": {},
              "vector_indexes": {}}
        arrays[p + "born"] = t.born.view()
        arrays[p + "died"] = t.died.view()
        if isinstance(t.ids, TextColumn):
            arrays[p + "ids"] = t.ids.codes.view()
            tm["id_words"] = t.ids.words
        else:
            arrays[p + "ids"] = t.ids.view()
        for name, col in t.columns.items():
            for k, a in col.to_arrays().items():
                arrays[f"{p}{name}.{k}"] = a
            if hasattr(col, "meta"):
                tm["columns"][name] = col.meta()
            if isinstance(col, VectorColumn):
                if len(col.extents) <= MAX_EXTENTS and col.covered_by_extents():
                    tm["extents"][name] = col.extents
                else:
                    arrays[f"{p}{name}.arena"] = col.arena.view()
                    copied.append((col, f"{p}{name}.arena"))
        for name, ix in t.indexes.items():
            for k, a in ix.to_arrays().items():
                arrays[f"{p}ix.{name}.{k}"] = a
        for name, ix in t.vector_indexes.items():
            tm["vector_indexes"][name] = True
            for k, a in ix.to_arrays().items():
                arrays[f"{p}vx.{name}.{k}"] = a
        meta["tables"].append(tm)
    h = engine.history
    arrays["h.version"] = np.fromiter((c.version for c in h), np.int64, len(h))
    arrays["h.ts"] = np.fromiter((c.timestamp_us for c in h), np.int64, len(h))
    arrays["h.rows"] = np.fromiter((c.rows_changed for c in h), np.int64, len(h))
    arrays["h.chain"] = np.frombuffer(b"".join(c.chain for c in h), np.uint8).reshape(len(h), 32)
    parts, length, offsets = record.encode(meta, arrays)
    # Once written, a copied arena is one run in the file: later checkpoints refer to it.
    payload_at = engine.log.end + F.FRAME_HEADER_SIZE
    runs = [(col, [[0, col.arena.n, payload_at + offsets[key]]]) for col, key in copied]

    def adopt() -> None:
        for col, extents in runs:
            col.extents = extents
    return parts, length, adopt


def load(engine, mv, offset: int) -> None:
    """Restore the engine's tables and history from the checkpoint frame at offset."""
    from .engine import Commit
    hdr = F.unpack_frame_header(mv[offset:offset + F.FRAME_HEADER_SIZE])
    body = offset + F.FRAME_HEADER_SIZE
    if hdr is None or hdr.kind != F.Kind.CHECKPOINT or body + hdr.length > len(mv):
        raise CorruptFileError(f"the checkpoint at offset {offset} is damaged")
    payload = mv[body:body + hdr.length]
    if F.frame_hash(hdr.kind, hdr.length, [payload]) != hdr.digest:
        raise CorruptFileError(f"the checkpoint at offset {offset} is damaged")
    meta, arrays, _ = record.decode(payload)
    for tm in meta["tables"]:
        t = Table(tm["cid"], tm["name"], Schema.from_dict(tm["schema"]), tm["created"])
        p = f"{t.cid}."
        t.born = Growable(np.int64, data=arrays[p + "born"])
        t.died = Growable(np.int64, data=arrays[p + "died"])
        t.next_int_id = tm["next_int_id"]
        if isinstance(t.ids, TextColumn):
            t.ids.load({"codes": arrays[p + "ids"]}, tm["id_words"])
        else:
            t.ids = Growable(np.int64, data=arrays[p + "ids"])
        for name, col in t.columns.items():
            sub = {k.rsplit(".", 1)[1]: a for k, a in arrays.items()
                   if k.startswith(f"{p}{name}.") and k.count(".") == 2}
            col.load(sub, tm["columns"].get(name))
            if isinstance(col, VectorColumn):
                _load_arena(col, tm["extents"].get(name), sub.get("arena"), mv, t.n)
        for name, ix in t.indexes.items():
            ix.load({k.rsplit(".", 1)[1]: a for k, a in arrays.items()
                     if k.startswith(f"{p}ix.{name}.")})
        for name in tm["vector_indexes"]:
            sub = {k[len(f"{p}vx.{name}."):]: a for k, a in arrays.items()
                   if k.startswith(f"{p}vx.{name}.")}
            t.load_vector_index(name, sub)
            t.vector_indexes[name].checkpointed = t.vector_indexes[name].linked
        t.committed_n = t.n
        alive = np.flatnonzero(t.died.view() == ALIVE)
        t.live = dict(zip(t.id_values(alive), alive.tolist()))
        engine.tables[t.cid] = t
        engine.names[t.name] = t.cid
    chains = arrays["h.chain"]
    engine.history = [Commit(int(v), int(ts), bytes(chains[i]), int(r)) for i, (v, ts, r) in
                      enumerate(zip(arrays["h.version"].tolist(), arrays["h.ts"].tolist(),
                                    arrays["h.rows"].tolist()))]


def _load_arena(col: VectorColumn, extents, arena, mv, n: int) -> None:
    dtype = np.dtype(VECTOR_DTYPES[col.field.dtype])
    dim = col.field.dim
    if arena is not None:
        col.arena = Growable(dtype, (dim,), data=arena)
        return
    parts = [np.frombuffer(mv, dtype, count=count * dim, offset=off).reshape(count, dim)
             for _first, count, off in extents]
    data = parts[0] if len(parts) == 1 else (np.concatenate(parts) if parts
                                             else np.empty((0, dim), dtype))
    if len(data) != n:
        raise CorruptFileError(f"checkpoint extents hold {len(data)} vectors, table has {n}")
    col.arena = Growable(dtype, (dim,), data=data)
    col.extents = [list(e) for e in extents]
