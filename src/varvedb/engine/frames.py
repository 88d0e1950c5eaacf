"""The frames a transaction writes: one class per kind, its writer and its reader.

Each kind (docs/file-format.md, "Kinds") is one dataclass here with
`encode()` → (meta, arrays) for storage/record.py, and `decode(engine, meta,
arrays)` → the frame, which trusts nothing. The engine applies
frames, never dicts, so a live write and a replay run the same code after
this module, and the grammar below is the only statement of each format
besides the file-format document.

A frame whose SHA-256 checked was written by some writer, not necessarily a
correct one. `decode` takes the decoded record of one frame (storage/record.py
has already checked its layout: the arrays lie inside the payload and have
allowed dtypes) and the engine state it is about to be applied to, and raises
CorruptFileError unless applying it keeps the invariants of table.py and
costs work and memory proportional to the frame's own bytes. Nothing is
allocated, and no engine state touched, before the check passes. A live write
builds its frames from checked values and applies them unchecked.

Grammar of each kind (meta keys, then arrays by name; `n` is meta["n"]; every
int is a msgpack int, never a bool; keys not listed are ignored):

COMMIT              (fixed struct, checked by the log's scan) timestamp within
                    years 1..9999, so the history can be read as datetimes.
CREATE_COLLECTION   cid: int >= 1 above every cid used so far (dropped ones too); name: a collection name not yet
                    used; schema: a dict that `Schema.from_dict` accepts.
                    No arrays.
INSERT              c: the cid of an existing table; first: int == that table's n;
                    n: int >= 0; fields: distinct names of schema fields;
                    lists: {field: list of n values} holding exactly the text,
                    json and sparsevec fields of `fields` (text values str or
                    None; sparsevec values bytes in sparse.py's form, or None);
                    ids: a list of n str when the table has text ids.
                    Arrays: ids <i8 (n,) when the table has int ids; for every
                    other field of `fields`, v:<field> — (n,) <i8 for int and
                    timestamp (a timestamp within years 1..9999), <f8 for float,
                    |b1 for bool; (n, dim) of the field's dtype (<f4 or <f2) for
                    vectors, finite if the field has a graph — and n:<field> |b1
                    (n,). No other arrays.
DELETE              c: the cid of an existing table. Arrays: rows <i8 (k,), distinct,
                    each a row in [0, n) alive on the commit's branch. No other arrays.
CREATE_INDEX        c: the cid of an existing table; field: one of its vector
                    fields that has no vector index yet, whose vectors so far
                    are all finite; spec: HNSW.to_dict() with m, ef_construction,
                    ef_search within schema.HNSW_LIMITS, or IVFPQ.to_dict() within
                    schema.IVF_LIMITS (pq_m dividing the field's dim). No arrays.
DROP_COLLECTION     c: the cid of an existing table. No arrays.
ADD_COLUMN          c: an existing table; n: int == its n; name: a valid field name
                    it does not have (not "id"); field: a dict `Field.from_dict`
                    accepts (not_null without a default only if the table has no
                    live rows). No arrays.
DROP_COLUMN         c: an existing table; name: one of its fields. No arrays.
RENAME_COLUMN       c: an existing table; old: one of its fields; new: a valid
                    field name it does not have. No arrays.
CREATE_SCALAR_INDEX c: an existing table; field: one of its int, float, text or
                    timestamp fields without an index; kind: "hash" | "sorted".
                    No arrays.
DROP_INDEX          c: an existing table; field: one of its fields that has a
                    vector or scalar index. No arrays.
SET_CHECK           c: an existing table; name: one of its fields; check: what
                    `Field.check` accepts for it (a list of [op, value], [op,
                    value, constraint name] or [op, value, constraint name,
                    place in it]), or nil (none). No arrays.
BASE                (only in the first commit of a log: a vacuum's anchor) next_cid:
                    int >= the engine's; tables: a list of {c, log_n, next_int_id},
                    each table once and not mapped yet, log_n >= its n, next_int_id
                    >= its own. Arrays: rows:<c> <i8 (n,) for each, strictly
                    increasing in [0, log_n). No other arrays.

BRANCH              op: "create" | "drop" | "merge"; id: int. create: id is the
                    commit's own branch, above every branch made (a branch's first
                    commit makes it); name, a branch name no live branch has;
                    parent: a live branch; fork: int <= the commit's version - 1.
                    drop (a commit on its parent): id, a live branch other than
                    main whose parent is the commit's branch and that no live
                    branch forks from. merge (a merge's commit, on the target, id):
                    source, another branch made; source_version: int below the
                    commit's version. No arrays. Any commit on a branch other than
                    main needs the branch made and not dropped, and changes no
                    schema.

Row numbers above (INSERT's first, DELETE's rows, ADD_COLUMN's n) are the
log's: a table a vacuum renumbered (its BASE map, rowmap.py) is written and
read through `encode(frame, rowmap)` and the checks here, which translate; a
DELETE naming a row the vacuum dropped is refused.

Vectors are checked to be finite only where a graph will walk them (its
kernels run with fastmath: a NaN distance can loop a greedy walk forever);
exact search over a NaN is merely a bad score, and the check costs a pass.

Every n is bounded by the frame itself: it equals the length of the ids array
or list, so each row an insert adds is paid for by at least one byte of the
file. (What a row then costs in memory is its columns' width: an absent vector
field is dim zeros, as a live insert would hold them.) An ADD_COLUMN fills
the table's rows so far in memory with the field's default or null: the same
width per row an insert would have cost had the field been there from the start.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import msgspec
import numpy as np

from .. import sparse
from ..errors import CorruptFileError, SchemaError, VarveError
from ..schema import (HNSW, IVFPQ, OBJECT_KINDS, TS_MAX_US, TS_MIN_US, UNINDEXED_KINDS,
                      Field, Schema, all_finite, brief, check_index_where, fit_index,
                      further_index, index_spec_from_dict,
                      timestamps_readable, validate_name)
from ..storage import format as F
from ..storage import record
from .rowmap import RowMap, log_n

# What applying a well-hashed but malformed frame may still raise past the
# checks below; replay turns each into CorruptFileError (a backstop, not the
# way memory stays bounded: the checks are).
APPLY_ERRORS = (VarveError, KeyError, TypeError, ValueError, IndexError, AttributeError,
                AssertionError, RecursionError, OverflowError, MemoryError, msgspec.MsgspecError)

INT64_MAX = (1 << 63) - 1
SCALAR_DTYPES = {"int": "<i8", "timestamp": "<i8", "float": "<f8", "bool": "|b1"}
# the Python types a listed (object) field's values may have, where not any json value
_ALLOWED = {"text": {str, type(None)}, "bytes": {bytes, type(None)}}
VECTOR_ARRAY_DTYPES = {"f32": "<f4", "f16": "<f2", "int8": "|i1", "bit": "|u1"}


def check_commit(rec: F.CommitRecord) -> None:
    """A commit frame's fields that its hashes do not vouch for: the timestamp."""
    if not TS_MIN_US <= rec.timestamp_us <= TS_MAX_US:
        raise CorruptFileError(f"commit of version {rec.version} has timestamp "
                               f"{rec.timestamp_us}, outside years 1..9999")


@dataclass
class CreateCollection:
    KIND: ClassVar[int] = F.Kind.CREATE_COLLECTION
    cid: int
    name: str
    schema: Schema

    def encode(self) -> tuple[dict, dict]:
        return {"cid": self.cid, "name": self.name, "schema": self.schema.to_dict()}, {}

    @classmethod
    def decode(cls, engine, meta: dict, arrays: dict) -> "CreateCollection":
        cid = int_of(meta, "cid", 1, INT64_MAX)
        if cid in engine.tables or cid < engine.next_cid:
            raise CorruptFileError(f"collection id {cid} is created twice (ids below "
                                   f"{engine.next_cid} are taken)")
        name = meta.get("name")
        if not isinstance(name, str):
            raise CorruptFileError(f"collection name {brief(name)}")
        try:
            validate_name(name)
            schema = Schema.from_dict(meta.get("schema"))
        except SchemaError as e:
            raise CorruptFileError(f"collection {brief(name)}: {e}") from None
        if name in engine.names:
            raise CorruptFileError(f"collection {name!r} is created twice")
        no_arrays(arrays)
        return cls(cid, name, schema)


@dataclass
class Insert:
    """New row versions [first, first + n) of one table: ids, then per present
    field (values, nulls) — a list for text and json, else an array.
    `located_at` holds where the record lies in the file (set once the frame
    is written or read): `offset` finds a field's value block there, which a
    vector column maps."""
    KIND: ClassVar[int] = F.Kind.INSERT
    cid: int
    first: int
    ids: list | np.ndarray
    columns: dict[str, tuple]
    located_at: tuple | None = None     # (the record's file offset, its arrays' offsets)

    def __len__(self) -> int:
        return len(self.ids)

    def encode(self) -> tuple[dict, dict]:
        meta: dict = {"c": self.cid, "first": self.first, "n": len(self.ids),
                      "fields": sorted(self.columns), "lists": {}}
        arrays: dict[str, np.ndarray] = {}
        if isinstance(self.ids, np.ndarray):
            arrays["ids"] = self.ids
        else:
            meta["ids"] = list(self.ids)
        for name, (vals, nulls) in self.columns.items():
            if isinstance(vals, list):
                meta["lists"][name] = vals
            else:
                arrays[f"v:{name}"] = vals
                arrays[f"n:{name}"] = nulls
        return meta, arrays

    def located(self, base: int, offsets: dict[str, int]) -> None:
        """Note where the value blocks lie in the file: the record starts at
        `base`, its arrays at `offsets` within it."""
        self.located_at = (base, offsets)

    def offset(self, name: str) -> int | None:
        """The file offset of field `name`'s value block (None: not located, or
        stored compressed). Asked only for vector fields: nothing is made for others."""
        if self.located_at is None:
            return None
        base, offsets = self.located_at
        at = offsets.get("v:" + name)
        return None if at is None else base + at

    @classmethod
    def decode(cls, engine, meta: dict, arrays: dict) -> "Insert":
        t = table_of(engine, meta)
        first = int_of(meta, "first", 0, INT64_MAX)
        if first != log_n(t.rowmap, t.n):
            raise CorruptFileError(f"insert into {t.name!r} starts at row {first}; "
                                   f"the collection has {log_n(t.rowmap, t.n)}")
        n = int_of(meta, "n", 0, INT64_MAX)
        fields = meta.get("fields")
        if not isinstance(fields, list) or not all_of_types(fields, {str}) \
                or len(set(fields)) != len(fields) or not set(fields) <= t.schema.fields.keys():
            raise CorruptFileError(f"insert into {t.name!r} names fields "
                                   f"{brief(fields)}")
        lists = meta.get("lists", {})
        if not isinstance(lists, dict):
            raise CorruptFileError(f"insert 'lists' is {brief(lists)}")
        listed = {f for f in fields
                  if t.schema.fields[f].kind in (*OBJECT_KINDS, "sparsevec")}
        if lists.keys() != listed:
            raise CorruptFileError(f"insert into {t.name!r} lists "
                                   f"{brief(list(lists))}, its text, json, bytes and sparsevec "
                                   f"fields are {sorted(listed)}")
        expected = set()
        if t.schema.id_kind == "text":
            ids = meta.get("ids")
            if not isinstance(ids, list) or len(ids) != n or not all_of_types(ids, {str}):
                raise CorruptFileError(f"insert of {n} rows has text ids {brief(ids)}")
        else:
            ids = array_of(arrays, "ids", "<i8", (n,))
            expected.add("ids")
        columns = {}
        for name in fields:
            f = t.schema.fields[name]
            if name in listed:
                vals = lists[name]
                allowed = _ALLOWED.get(f.kind)
                if not isinstance(vals, list) or len(vals) != n \
                        or (allowed and not all_of_types(vals, allowed)) \
                        or (f.kind == "sparsevec" and not sparse.stored_ok(vals, f.dim)):
                    raise CorruptFileError(f"insert of {n} rows: {f.kind} field {name!r} "
                                           f"holds {brief(vals)}")
                columns[name] = (vals, None)
                continue
            if f.kind == "vector":
                v = array_of(arrays, f"v:{name}", VECTOR_ARRAY_DTYPES[f.dtype], (n, f.width))
                # the writer refuses NaN and inf; a graph's kernels rely on it (all_finite)
                if name in t.vector_indexes and not all_finite(v):
                    raise CorruptFileError(f"insert: vector field {name!r} holds NaN or inf")
            else:
                v = array_of(arrays, f"v:{name}", SCALAR_DTYPES[f.kind], (n,))
                if f.kind == "timestamp" and not timestamps_readable(v):
                    raise CorruptFileError(f"insert: timestamp field {name!r} holds values "
                                           "outside years 1..9999")
            columns[name] = (v, array_of(arrays, f"n:{name}", "|b1", (n,)))
            expected |= {f"v:{name}", f"n:{name}"}
        only_arrays(arrays, expected)
        return cls(t.cid, t.n, ids, columns)


@dataclass
class Delete:
    """Row versions of one table that die (each alive until now)."""
    KIND: ClassVar[int] = F.Kind.DELETE
    cid: int
    rows: np.ndarray

    def encode(self) -> tuple[dict, dict]:
        return {"c": self.cid}, {"rows": np.asarray(self.rows, np.int64)}

    @classmethod
    def decode(cls, engine, meta: dict, arrays: dict) -> "Delete":
        t = table_of(engine, meta)
        rows = array_of(arrays, "rows", "<i8", None)
        only_arrays(arrays, {"rows"})
        if len(rows):
            end = log_n(t.rowmap, t.n)
            if int(rows.min()) < 0 or int(rows.max()) >= end:
                raise CorruptFileError(f"delete names rows outside [0, {end}) of {t.name!r}")
            if t.rowmap is not None:
                rows = t.rowmap.to_memory(rows)
                if rows is None:
                    raise CorruptFileError(f"delete names rows of {t.name!r} that a vacuum "
                                           "dropped")
            # writers delete only live rows: a row dies once on each branch
            if len(np.unique(rows)) != len(rows) or not t.alive_mask(t.n)[rows].all():
                raise CorruptFileError(f"delete names rows of {t.name!r} that are already dead")
        return cls(t.cid, rows)


@dataclass
class CreateIndex:
    KIND: ClassVar[int] = F.Kind.CREATE_INDEX
    cid: int
    field: str
    spec: HNSW | IVFPQ

    def encode(self) -> tuple[dict, dict]:
        return {"c": self.cid, "field": self.field, "spec": self.spec.to_dict()}, {}

    @classmethod
    def decode(cls, engine, meta: dict, arrays: dict) -> "CreateIndex":
        t = table_of(engine, meta)
        name = meta.get("field")
        f = t.schema.fields.get(name) if isinstance(name, str) else None
        if f is None or f.kind != "vector":
            raise CorruptFileError(f"index on {brief(name)}, not a vector field "
                                   f"of {t.name!r}")
        try:
            spec = fit_index(index_spec_from_dict(meta.get("spec")), f.dtype, f.dim)
            check_index_where(spec, t.schema.fields)
        except SchemaError as e:
            raise CorruptFileError(f"index on {name!r}: {e}") from None
        if not further_index(f, spec):
            raise CorruptFileError(f"{name!r} of {t.name!r} is indexed twice")
        no_arrays(arrays)
        # the rows so far were checked only if a graph already walked them
        if not all_finite(t.columns[name].arena.view()):
            raise CorruptFileError(f"index on {name!r}: its vectors hold NaN or inf")
        return cls(t.cid, name, spec)


# ---- schema changes (DDL): each rewrites no rows ------------------------------------

@dataclass
class DropCollection:
    """The table and its rows are gone for every version; its name may be reused."""
    KIND: ClassVar[int] = F.Kind.DROP_COLLECTION
    cid: int

    def encode(self) -> tuple[dict, dict]:
        return {"c": self.cid}, {}

    @classmethod
    def decode(cls, engine, meta: dict, arrays: dict) -> "DropCollection":
        t = table_of(engine, meta)
        no_arrays(arrays)
        return cls(t.cid)


@dataclass
class AddColumn:
    """A new field; the table's `n` rows so far read as its default (or null).
    No row data: the column is filled in memory when the frame is applied."""
    KIND: ClassVar[int] = F.Kind.ADD_COLUMN
    cid: int
    n: int
    name: str
    field: Field

    def encode(self) -> tuple[dict, dict]:
        return {"c": self.cid, "n": self.n, "name": self.name,
                "field": self.field.to_dict()}, {}

    @classmethod
    def decode(cls, engine, meta: dict, arrays: dict) -> "AddColumn":
        t = table_of(engine, meta)
        n = int_of(meta, "n", 0, INT64_MAX)
        if n != log_n(t.rowmap, t.n):
            raise CorruptFileError(f"add column to {t.name!r} at row {n}; it has "
                                   f"{log_n(t.rowmap, t.n)}")
        name = new_field_name(t, meta.get("name"))
        try:
            f = Field.from_dict(meta.get("field"))
        except SchemaError as e:
            raise CorruptFileError(f"add column {name!r}: {e}") from None
        if f.not_null and f.default is None and t.live:
            raise CorruptFileError(f"add column {name!r}: not null without a default on "
                                   f"{t.name!r}, which has documents")
        no_arrays(arrays)
        return cls(t.cid, t.n, name, f)


@dataclass
class DropColumn:
    """A field, its column and its indexes are gone (for every version)."""
    KIND: ClassVar[int] = F.Kind.DROP_COLUMN
    cid: int
    name: str

    def encode(self) -> tuple[dict, dict]:
        return {"c": self.cid, "name": self.name}, {}

    @classmethod
    def decode(cls, engine, meta: dict, arrays: dict) -> "DropColumn":
        t = table_of(engine, meta)
        name = field_of(t, meta.get("name"))
        no_arrays(arrays)
        return cls(t.cid, name)


@dataclass
class RenameColumn:
    """A field, its column and its indexes take a new name (for every version)."""
    KIND: ClassVar[int] = F.Kind.RENAME_COLUMN
    cid: int
    old: str
    new: str

    def encode(self) -> tuple[dict, dict]:
        return {"c": self.cid, "old": self.old, "new": self.new}, {}

    @classmethod
    def decode(cls, engine, meta: dict, arrays: dict) -> "RenameColumn":
        t = table_of(engine, meta)
        old = field_of(t, meta.get("old"))
        new = new_field_name(t, meta.get("new"))
        no_arrays(arrays)
        return cls(t.cid, old, new)


@dataclass
class CreateScalarIndex:
    """A "hash" or "sorted" index on a scalar field without one, built over its rows;
    or "fts": a full-text index on a text field without one, analyzed as PostgreSQL's
    configuration `ts_config` (SQL's CREATE INDEX ... USING gin (to_tsvector(...)))."""
    KIND: ClassVar[int] = F.Kind.CREATE_SCALAR_INDEX
    cid: int
    field: str
    kind: str
    name: str | None = None          # the index's name, when it was given one
    ts_config: str | None = None     # "fts": the configuration

    def encode(self) -> tuple[dict, dict]:
        meta = {"c": self.cid, "field": self.field, "kind": self.kind}
        if self.name is not None:
            meta["name"] = self.name
        if self.ts_config is not None:
            meta["ts_config"] = self.ts_config
        return meta, {}

    @classmethod
    def decode(cls, engine, meta: dict, arrays: dict) -> "CreateScalarIndex":
        t = table_of(engine, meta)
        name = field_of(t, meta.get("field"))
        f, kind = t.schema.fields[name], meta.get("kind")
        if kind == "fts":
            from ..text.tsconfig import CONFIGS
            config = meta.get("ts_config")
            if f.kind != "text" or f.fts or config not in CONFIGS or "name" in meta:
                raise CorruptFileError(f"a full-text index ({brief(config)}) on {f.kind} "
                                       f"field {name!r} of {t.name!r} (fts now: {f.fts})")
            no_arrays(arrays)
            return cls(t.cid, name, kind, None, config)
        if kind not in ("hash", "sorted") or f.kind in UNINDEXED_KINDS \
                or f.index is not None:
            raise CorruptFileError(f"a {brief(kind)} index on {f.kind} field "
                                   f"{name!r} of {t.name!r} (index now: {f.index})")
        index_name = meta.get("name")
        if index_name is not None:
            try:
                validate_name(index_name, "index")
            except SchemaError:
                raise CorruptFileError(f"index name {brief(index_name)} on "
                                       f"{name!r}") from None
        no_arrays(arrays)
        return cls(t.cid, name, kind, index_name)


@dataclass
class DropIndex:
    """A field's index (its HNSW graph, or its scalar index) is gone; `index`: the
    name of one of its further vector indexes (Field.more_indexes) instead."""
    KIND: ClassVar[int] = F.Kind.DROP_INDEX
    cid: int
    field: str
    index: str | None = None

    def encode(self) -> tuple[dict, dict]:
        meta = {"c": self.cid, "field": self.field}
        if self.index is not None:
            meta["index"] = self.index
        return meta, {}

    @classmethod
    def decode(cls, engine, meta: dict, arrays: dict) -> "DropIndex":
        t = table_of(engine, meta)
        name = field_of(t, meta.get("field"))
        if name not in t.vector_indexes and name not in t.indexes:
            raise CorruptFileError(f"drop index on {name!r} of {t.name!r}, which has none")
        index = meta.get("index")
        if index is not None and index not in {s.name for s in
                                               t.schema.fields[name].more_indexes}:
            raise CorruptFileError(f"drop index {brief(index)} on {name!r} of {t.name!r}, "
                                   "which has none of that name")
        no_arrays(arrays)
        return cls(t.cid, name, index)


@dataclass
class SetCheck:
    """A field's CHECK conditions are `check` from now on (None: none). The rows
    already there were checked by the writer (SQL's ALTER TABLE ADD CHECK); the
    reader trusts no row to it, as it trusts no row to any check."""
    KIND: ClassVar[int] = F.Kind.SET_CHECK
    cid: int
    name: str
    check: tuple | None

    def encode(self) -> tuple[dict, dict]:
        return {"c": self.cid, "name": self.name,
                "check": None if self.check is None else [list(x) for x in self.check]}, {}

    @classmethod
    def decode(cls, engine, meta: dict, arrays: dict) -> "SetCheck":
        t = table_of(engine, meta)
        name = field_of(t, meta.get("name"))
        try:
            f = replace(t.schema.fields[name], check=meta.get("check"))
        except SchemaError as e:
            raise CorruptFileError(f"check of {name!r} of {t.name!r}: {e}") from None
        no_arrays(arrays)
        return cls(t.cid, name, f.check)


@dataclass
class Base:
    """The last frame of a vacuumed file's anchor commit: for each table, the log's
    numbers of the rows the base kept (engine/rowmap.py) and its id counter, and
    the engine's collection counter (so no id or cid is handed out twice)."""
    KIND: ClassVar[int] = F.Kind.BASE
    next_cid: int
    tables: dict[int, tuple[np.ndarray, int, int]]   # cid -> (kept, log_base, next_int_id)

    def encode(self) -> tuple[dict, dict]:
        meta = {"next_cid": self.next_cid,
                "tables": [{"c": cid, "log_n": base, "next_int_id": nid}
                           for cid, (_, base, nid) in self.tables.items()]}
        return meta, {f"rows:{cid}": np.asarray(kept, np.int64)
                      for cid, (kept, _, _) in self.tables.items()}

    @classmethod
    def decode(cls, engine, meta: dict, arrays: dict) -> "Base":
        if engine.history:
            raise CorruptFileError("a BASE frame outside a vacuumed file's first commit")
        next_cid = int_of(meta, "next_cid", engine.next_cid, INT64_MAX)
        tms = meta.get("tables")
        if not isinstance(tms, list):
            raise CorruptFileError(f"BASE tables are {brief(tms)}")
        tables = {}
        for tm in tms:
            if not isinstance(tm, dict):
                raise CorruptFileError(f"a BASE table is {brief(tm)}")
            t = table_of(engine, tm)
            if t.cid in tables or t.rowmap is not None:
                raise CorruptFileError(f"BASE maps {t.name!r} twice")
            kept = array_of(arrays, f"rows:{t.cid}", "<i8", (t.n,))
            base = int_of(tm, "log_n", t.n, INT64_MAX)
            if t.n and (int(kept[0]) < 0 or int(kept[-1]) >= base
                        or np.any(kept[1:] <= kept[:-1])):
                raise CorruptFileError(f"BASE rows of {t.name!r} are not increasing in "
                                       f"[0, {base})")
            tables[t.cid] = (kept, base,
                             int_of(tm, "next_int_id", t.next_int_id, INT64_MAX + 1))
        only_arrays(arrays, {f"rows:{cid}" for cid in tables})
        return cls(next_cid, tables)


@dataclass
class BranchOp:
    """A branch made (the first frame of its first commit), dropped (a commit on its
    parent) or merged into the commit's branch (`source` as of `source_version`)."""
    KIND: ClassVar[int] = F.Kind.BRANCH
    op: str
    id: int
    name: str = ""
    parent: int = 0
    fork: int = 0
    source: int = 0
    source_version: int = 0
    cid: ClassVar[None] = None      # no table

    def encode(self) -> tuple[dict, dict]:
        meta = {"op": self.op, "id": self.id}
        if self.op == "create":
            meta.update(name=self.name, parent=self.parent, fork=self.fork)
        elif self.op == "merge":
            meta.update(source=self.source, source_version=self.source_version)
        return meta, {}

    @classmethod
    def decode(cls, engine, meta: dict, arrays: dict) -> "BranchOp":
        no_arrays(arrays)
        op, bid, version = meta.get("op"), meta.get("id"), engine.applying_version
        catalog, here = engine.catalog, engine.applying_branch
        if op == "drop":
            b = catalog.by_id.get(bid) if type(bid) is int else None
            if b is None or b.dropped or b.id == 0 or b.parent != here or any(
                    c.parent == bid for c in catalog.live()):
                raise CorruptFileError(f"a BRANCH frame drops {brief(bid)} on "
                                       f"branch {here}: not a live leaf branch of it")
            return cls(op, bid)
        if bid != here:
            raise CorruptFileError(f"a BRANCH frame of branch {brief(bid)} in a "
                                   f"commit on branch {here}")
        if op == "create":
            if bid in catalog.by_id:
                raise CorruptFileError(f"branch {bid} is made twice")
            name = meta.get("name")
            try:
                catalog.check_new_name(name)
            except VarveError as e:
                raise CorruptFileError(f"a BRANCH frame: {e}") from None
            parent = meta.get("parent")
            if parent not in catalog.by_id or catalog.by_id[parent].dropped:
                raise CorruptFileError(f"branch {name!r} forks from {brief(parent)}, "
                                       "no live branch")
            return cls(op, bid, name, parent, int_of(meta, "fork", 0, version - 1))
        if bid not in catalog.by_id or catalog.by_id[bid].dropped:
            raise CorruptFileError(f"a BRANCH frame names branch {brief(bid)}, "
                                   "which is not live")
        if op == "merge":
            source = meta.get("source")
            if source not in catalog.by_id or source == bid:
                raise CorruptFileError(f"a merge of {brief(source)} into {bid}")
            return cls(op, bid, source=source,
                       source_version=int_of(meta, "source_version", 0, version - 1))
        raise CorruptFileError(f"a BRANCH frame of op {brief(op)}")


Frame = (CreateCollection | Insert | Delete | CreateIndex | DropCollection | AddColumn
         | DropColumn | RenameColumn | CreateScalarIndex | DropIndex | SetCheck | Base
         | BranchOp)
KINDS = {cls.KIND: cls for cls in (CreateCollection, Insert, Delete, CreateIndex,
                                   DropCollection, AddColumn, DropColumn, RenameColumn,
                                   CreateScalarIndex, DropIndex, SetCheck, Base, BranchOp)}
SCHEMA_FRAMES = (AddColumn, DropColumn, RenameColumn, CreateScalarIndex, DropIndex, SetCheck)
SCHEMA_CHANGES = (CreateCollection, DropCollection, CreateIndex, *SCHEMA_FRAMES)


def encode(frame: Frame, rowmap: RowMap | None = None, packed=None
           ) -> tuple[list, int, dict[str, int]]:
    """The frame as a record: (parts, length, array offsets within it). Rows are
    numbered as the log numbers them (`rowmap`: the table's, if a vacuum made one).
    `packed`: which arrays (and the meta) may be compressed (record.py)."""
    meta, arrays = frame.encode()
    if rowmap is not None:
        if isinstance(frame, Insert):
            meta["first"] = rowmap.log_n(frame.first)
        elif isinstance(frame, AddColumn):
            meta["n"] = rowmap.log_n(frame.n)
        elif isinstance(frame, Delete):
            arrays["rows"] = rowmap.to_log(frame.rows)
    return record.encode(meta, arrays, packed)


def decode(engine, kind: int, payload, base: int) -> Frame:
    """The payload of a logged frame (at file offset `base`) as the frame it
    encodes, checked against the engine's state; CorruptFileError if it is not
    one varvedb could have written."""
    cls = KINDS.get(kind)
    if cls is None:
        raise CorruptFileError(f"unknown frame kind {kind}")
    if engine.applying_branch and cls in SCHEMA_CHANGES:
        raise CorruptFileError(f"a {cls.__name__} frame on branch {engine.applying_branch}: "
                               "the schema changes on main only")
    meta, arrays, offsets = record.decode(payload)
    frame = cls.decode(engine, meta, arrays)
    if isinstance(frame, Insert):
        frame.located(base, offsets)
    return frame


# ---- helpers (shared with checkpoint.py) ------------------------------------------

def int_of(meta: dict, key: str, lo: int, hi: int) -> int:
    v = meta.get(key)
    if type(v) is not int or not lo <= v <= hi:
        raise CorruptFileError(f"{key!r} is {brief(v)}, not an integer in {lo}..{hi}")
    return v


def field_of(t, name) -> str:
    """name, which must be one of t's fields."""
    if not isinstance(name, str) or name not in t.schema.fields:
        raise CorruptFileError(f"frame names field {brief(name)}, which "
                               f"{t.name!r} does not have")
    return name


def new_field_name(t, name) -> str:
    """name, which must be a valid field name that t does not have yet."""
    if not isinstance(name, str) or name == "id" or name in t.schema.fields:
        raise CorruptFileError(f"new field {brief(name)} of {t.name!r}")
    try:
        return validate_name(name, "field")
    except SchemaError as e:
        raise CorruptFileError(str(e)) from None


def table_of(engine, meta: dict):
    cid = meta.get("c")
    t = engine.tables.get(cid) if type(cid) is int else None
    if t is None:
        raise CorruptFileError(f"frame names collection id {brief(cid)}, which does not exist")
    return t


def array_of(arrays: dict, name: str, dtype: str, shape: tuple | None) -> np.ndarray:
    """arrays[name], which must have this dtype and shape (None: any 1-d)."""
    a = arrays.get(name)
    if a is None:
        raise CorruptFileError(f"array {name!r} is missing")
    if a.dtype.str != dtype or (a.ndim != 1 if shape is None else a.shape != shape):
        raise CorruptFileError(f"array {name!r} is {a.dtype.str} {a.shape}, expected "
                               f"{dtype} {shape if shape is not None else '(k,)'}")
    return a


def only_arrays(arrays: dict, names: set) -> None:
    extra = arrays.keys() - names
    if extra:
        raise CorruptFileError(f"unexpected arrays {sorted(extra)[:4]}")


def no_arrays(arrays: dict) -> None:
    only_arrays(arrays, set())


def all_of_types(values: list, types: set) -> bool:
    # the set of types is built in C: no Python-level loop per value
    return set(map(type, values)) <= types


