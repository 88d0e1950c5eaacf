"""A collection's in-memory state: row versions, their columns, and the live id map.

Why this layout: every write appends row versions and never edits one, except
to stamp `died`. A row version is visible as of version v when
`born <= v < died`, so a writer can apply an uncommitted transaction in place,
tagged with the next version, and readers at the committed version never see
it — no locks and no copies. Rolling back truncates the appended rows and
unstamps `died` (the undo log).

Invariants:
* every column, `ids`, `born` and `died` have exactly `n` rows;
* `live` maps each document id to its row whose `died` is ALIVE (the writer's
  view, including its open transaction); at most one such row per id;
* frames are applied identically live and on replay, so the state after
  reopen equals the state before close.
"""
from __future__ import annotations

import copy
import threading
import uuid
from dataclasses import replace

import numpy as np

from ..errors import DuplicateIdError
from ..index.fts import FtsIndex
from ..index.scalar import make_scalar_index
from ..index.vector_index import VectorIndex
from ..schema import HNSW, Field, Schema, coerce_ids
from .columns import Growable, TextColumn, VectorColumn, make_column

ALIVE = np.iinfo(np.int64).max


class Table:
    def __init__(self, cid: int, name: str, schema: Schema, created: int):
        self.cid = cid
        self.name = name
        self.schema = schema
        self.created = created                 # version that created it
        self.ids = TextColumn() if schema.id_kind == "text" else Growable(np.int64)
        self.born = Growable(np.int64)
        self.died = Growable(np.int64)
        self.columns = {name: make_column(f) for name, f in schema.fields.items()}
        self._live: dict | None = {}           # see `live`
        self._live_lock = threading.Lock()
        self.next_int_id = 1
        self.indexes = {name: make_scalar_index(name, f)     # scalar field -> index
                        for name, f in schema.fields.items() if f.index}
        self.vector_indexes: dict[str, VectorIndex] = {}
        for name, f in schema.fields.items():
            if f.kind == "vector" and f.vector_index is not None:
                self.vector_indexes[name] = VectorIndex(name, f.width, f.metric, f.vector_index)
        self.text_indexes = {name: make_text_index(name, f)    # fts text field -> index
                             for name, f in schema.fields.items() if f.fts}
        self.committed_n = 0                   # rows of committed versions (a prefix)
        self.rowmap = None                     # the log's numbering, once vacuumed (rowmap.py)
        self._mask_cache: dict = {}            # field or None -> (version, n, mask, count)
        self._undo: list | None = None         # set while a transaction is open

    @property
    def live(self) -> dict:
        """Document id -> its live row. A table loaded from a checkpoint builds it
        on first use: for millions of rows the dict is hundreds of MB that a reader
        which only searches never needs (and a capped one cannot spare)."""
        live = self._live
        if live is None:
            with self._live_lock:
                if self._live is None:
                    alive = np.flatnonzero(self.died.data[:self.n] == ALIVE)
                    self._live = dict(zip(self.id_values(alive), alive.tolist()))
                live = self._live
        return live

    @property
    def n(self) -> int:
        return self.born.n

    def memory_bytes(self) -> dict[str, int]:
        """Bytes of the arrays this table holds, by part (the server's metrics):
        rows (ids, born, died), columns, vector graphs, text and scalar indexes.
        Arrays mapped from the file count too (their pages are the OS's to keep)."""
        def grown(obj) -> int:
            return sum(v.data.nbytes for v in vars(obj).values() if isinstance(v, Growable))
        rows = grown(self) + (grown(self.ids) if isinstance(self.ids, TextColumn) else 0)
        return {"rows": rows, "columns": sum(grown(c) for c in self.columns.values()),
                "vector_indexes": sum(vi.memory_bytes() for vi in self.vector_indexes.values()),
                "text_indexes": sum(ix.nbytes() for ix in self.text_indexes.values()),
                "scalar_indexes": sum(ix.nbytes() for ix in self.indexes.values())}

    # ---- reading -------------------------------------------------------------

    def visible(self, version: int, n: int, final: bool = False, nonnull: str | None = None
                ) -> tuple[np.ndarray, int]:
        """(read-only mask, count) over row versions [0, n): visible as of
        `version` (and with a non-null `nonnull` field). Combine the mask into
        a new array; never write to it.

        Readers get here through a Snapshot, which takes `n` once, after the
        version, so all its masks have one length while the writer appends.
        `final` says the version is committed, so the mask may be cached for
        the next reader."""
        # Visibility as of a committed version never changes (later writes only
        # append rows born later and stamp `died` with later versions), and a
        # row's nulls never change, so a committed version's mask is cached.
        cached = self._mask_cache.get(nonnull)
        if cached is not None and cached[0] == version and cached[1] == n:
            return cached[2], cached[3]
        mask = (self.born.data[:n] <= version) & (self.died.data[:n] > version)
        if nonnull is not None:
            mask &= ~self.columns[nonnull].nulls_head(n)
        mask.flags.writeable = False
        count = int(np.count_nonzero(mask))
        if final:
            self._mask_cache[nonnull] = (version, n, mask, count)
        return mask, count

    def visible_row(self, key, version: int, n: int) -> int:
        """The row of document `key` visible as of `version` among [0, n), or -1.

        The live map is tried first: its row is the answer when it is visible
        at this version (at most one row of an id is visible at any version),
        which is every read of the current state. Otherwise (an older version,
        or a row the writer has replaced or deleted but not committed) every
        row written for the id is looked at."""
        born, died = self.born.data, self.died.data
        r = self.live.get(key)
        if r is not None and r < n and born.item(r) <= version < died.item(r):
            return r
        rows = self.rows_of_id(key, n)
        rows = rows[(born[rows] <= version) & (died[rows] > version)]
        return int(rows[0]) if len(rows) else -1

    def id_value(self, row: int):
        return self.ids.value(row) if isinstance(self.ids, TextColumn) else self.ids.data.item(row)

    def id_values(self, rows: np.ndarray) -> list:
        ids = self.ids
        if isinstance(ids, TextColumn):     # an id is never null: no null mask to make
            words = ids.words
            return [words[c] for c in ids.codes.data[rows].tolist()]
        return ids.data[rows].tolist()

    def rows_of_id(self, key, n: int) -> np.ndarray:
        """Every row version among [0, n) written for one document id (a scan)."""
        if isinstance(self.ids, TextColumn):
            return self.ids.rows_equal(key, n)
        return np.flatnonzero(self.ids.data[:n] == key)

    def live_rows(self, keys: list) -> np.ndarray:
        live = self.live
        return np.fromiter((live.get(k, -1) for k in keys), np.int64, len(keys))

    # ---- transactions --------------------------------------------------------

    def begin(self) -> None:
        # n, died rows, live-map ops, next id, and the schema with its columns and
        # indexes before the transaction (schema changes replace these, never edit them)
        self._undo = [self.n, [], [], self.next_int_id, dict(self.vector_indexes), self.schema,
                      dict(self.columns), dict(self.indexes), dict(self.text_indexes)]

    def end(self) -> None:
        """The transaction committed: its rows are now part of the committed prefix."""
        self._undo = None
        self.committed_n = self.n

    def rollback(self) -> None:
        n0, died_rows, live_undo, next_id, vector_indexes, schema, columns, indexes, \
            text_indexes = self._undo
        if schema is not self.schema:
            self._mask_cache = {}
        self.columns, self.indexes, self.text_indexes = columns, indexes, text_indexes
        self.vector_indexes, self.schema = vector_indexes, schema
        for col in [self.born, self.died, self.ids, *self.columns.values()]:
            col.truncate(n0)
        if died_rows:
            self.died.set(np.concatenate(died_rows), ALIVE)
        for added, keys, rows in reversed(live_undo):
            if added:
                for k in keys:
                    self.live.pop(k, None)
            else:
                self.live.update(zip(keys, rows))
        self.next_int_id = next_id
        for ix in [*self.indexes.values(), *self.text_indexes.values()]:
            ix.truncate(n0)
        self._undo = None

    # ---- applying frames -----------------------------------------------------

    def assign_ids(self, raw: list) -> list | np.ndarray:
        """Ids for a batch of rows, None where the caller gave none: fresh uuids
        for text ids, else integers above every id used so far (or given)."""
        missing = [i for i, v in enumerate(raw) if v is None]
        if not missing:
            return coerce_ids(self.schema, raw)
        given = [v for v in raw if v is not None]
        if self.schema.id_kind == "text":
            fresh = [uuid.uuid4().hex for _ in missing]
        else:
            given_ids = coerce_ids(self.schema, given)
            start = max(self.next_int_id, int(given_ids.max()) + 1 if len(given_ids) else 0)
            fresh = list(range(start, start + len(missing)))
        out = list(raw)
        for i, v in zip(missing, fresh):
            out[i] = v
        return coerce_ids(self.schema, out)

    def check_new_ids(self, keys: list) -> None:
        """DuplicateIdError unless the keys are distinct and none is live."""
        check_unique(keys)
        taken = self.live_rows(keys)
        if (taken >= 0).any():
            dup = keys[int(np.flatnonzero(taken >= 0)[0])]
            raise DuplicateIdError(f"id {dup!r} already exists in {self.name!r}")

    def apply_insert(self, frame, version: int) -> None:
        """Apply an Insert frame (frames.py): its rows are born at `version`."""
        first, count = frame.first, len(frame.ids)
        assert first == self.n, f"insert frame starts at row {first}, table has {self.n}"
        if isinstance(self.ids, TextColumn):
            keys = list(frame.ids)
            self.ids.append(keys)
        else:
            id_arr = frame.ids
            self.ids.append(id_arr)
            keys = id_arr.tolist()
            if count:
                self.next_int_id = max(self.next_int_id, int(id_arr.max()) + 1)
        self.died.append(np.full(count, ALIVE, np.int64))
        present = frame.columns
        for name, col in self.columns.items():
            if name not in present:
                col.append_nulls(count)
            elif isinstance(col, VectorColumn):
                vals, nulls = present[name]
                col.append(vals, nulls, frame.offsets.get(name))
            else:
                vals, nulls = present[name]
                if isinstance(vals, list):
                    col.append(vals)
                else:
                    col.append(vals, nulls)
        if self._undo is not None:
            self._undo[2].append((True, keys, None))
        self.live.update(zip(keys, range(first, first + count)))
        for ix in self.indexes.values():
            ix.extend(self, first, first + count)
        for name, ix in self.text_indexes.items():
            col = self.columns[name]
            ix.extend(first, first + count, col.codes.data[first:first + count], col.words)
        # `born` goes last: its length is the table's `n`, and readers running
        # beside the writer slice every other column to that n, so each must
        # already hold the new rows (else masks of different lengths, or codes
        # read from unwritten memory).
        self.born.append(np.full(count, version, np.int64))

    def apply_delete(self, rows: np.ndarray, version: int) -> None:
        if not len(rows):
            return
        self.died.set(rows, version)
        keys = self.id_values(rows)
        if self._undo is not None:
            self._undo[1].append(np.array(rows, np.int64))
            self._undo[2].append((False, keys, np.asarray(rows).tolist()))
        # Writers delete only live rows, and an upsert writes its delete
        # before its insert, so each deleted row is its id's live row.
        live = self.live
        for key in keys:
            live.pop(key, None)

    # ---- vector indexes --------------------------------------------------------

    def create_index(self, field: str, hnsw: HNSW, version: int) -> None:
        """Apply a CreateIndex frame: the graph starts empty and is linked after commit."""
        f = self.schema.fields[field]
        if hnsw.metric is not None:       # an SQL operator class names the metric
            f = replace(f, metric=hnsw.metric)
        fields = dict(self.schema.fields)
        fields[field] = replace(f, vector_index=hnsw)
        self.schema = replace(self.schema, fields=fields)
        self.vector_indexes = {**self.vector_indexes,
                               field: VectorIndex(field, f.width, f.metric, hnsw)}

    # ---- schema changes (each applies one DDL frame; no row is rewritten) ----------
    # The schema is the current one for every read, as_of included: a renamed
    # field reads under its new name, a dropped one is gone for every version,
    # and an added one reads its default (or null) for the rows written before it.
    # Each replaces the dicts it changes (the undo keeps the old ones), filling
    # a new column before the schema names it, for readers beside the writer.

    def _set_schema(self, fields: dict) -> None:
        self._mask_cache = {}      # keyed by field name, which may now mean another column
        self.schema = Schema(fields, self.schema.id_kind)

    def add_column(self, name: str, f: Field) -> None:
        """A new field: the rows so far hold its default, or null (in memory only)."""
        col, n = make_column(f), self.n
        if f.default is None:
            col.append_nulls(n)
        elif isinstance(col, TextColumn):
            if n:
                col.codes.append(np.full(n, col.encode([f.default])[0], np.int32))
        else:
            col.append(*f.default_column(n))
        self.columns = {**self.columns, name: col}
        if f.index:
            self.indexes = {**self.indexes, name: self._built_index(name, f)}
        if f.fts:
            ix = make_text_index(name, f)
            if n and isinstance(col, TextColumn):
                ix.extend(0, n, col.codes.data[:n], col.words)
            self.text_indexes = {**self.text_indexes, name: ix}
        if f.kind == "vector" and f.vector_index is not None:
            self.vector_indexes = {**self.vector_indexes,
                                   name: VectorIndex(name, f.width, f.metric, f.vector_index)}
        self._set_schema({**self.schema.fields, name: f})

    def drop_column(self, name: str) -> None:
        self._set_schema({k: f for k, f in self.schema.fields.items() if k != name})
        self.vector_indexes = {k: v for k, v in self.vector_indexes.items() if k != name}
        self.indexes = {k: v for k, v in self.indexes.items() if k != name}
        self.text_indexes = {k: v for k, v in self.text_indexes.items() if k != name}
        self.columns = {k: c for k, c in self.columns.items() if k != name}

    def rename_column(self, old: str, new: str) -> None:
        def renamed(d: dict) -> dict:   # in the same place: the field order is kept
            return {new if k == old else k: v for k, v in d.items()}
        self.columns = renamed(self.columns)
        if old in self.indexes:
            ix = copy.copy(self.indexes[old])   # the undo keeps the old one as it was
            ix.field = new
            self.indexes = renamed({**self.indexes, old: ix})
        self.vector_indexes = renamed(self.vector_indexes)
        if old in self.text_indexes:
            ix = copy.copy(self.text_indexes[old])
            ix.field = new
            self.text_indexes = renamed({**self.text_indexes, old: ix})
        # a vector filled from the renamed text field now names it as its source
        self._set_schema({k: replace(f, source=new) if f.source == old else f
                          for k, f in renamed(self.schema.fields).items()})

    def create_scalar_index(self, field: str, kind: str, name: str | None = None) -> None:
        """A "hash" or "sorted" index on a scalar field, built over every row so far."""
        f = replace(self.schema.fields[field], index=kind, index_name=name)
        self.indexes = {**self.indexes, field: self._built_index(field, f)}
        self._set_schema({**self.schema.fields, field: f})

    def drop_index(self, field: str) -> None:
        """Drop the field's HNSW graph or its scalar index."""
        f = self.schema.fields[field]
        if field in self.vector_indexes:
            f = replace(f, vector_index=None)
            self.vector_indexes = {k: v for k, v in self.vector_indexes.items() if k != field}
        else:
            f = replace(f, index=None, index_name=None)
        self._set_schema({**self.schema.fields, field: f})
        self.indexes = {k: v for k, v in self.indexes.items() if k != field}

    def _built_index(self, name: str, f: Field):
        """A scalar index over the rows so far (the column must be in self.columns)."""
        ix = make_scalar_index(name, f)
        if self.n:
            ix.n = self.n
            ix.merge(self)
        return ix

    def load_vector_index(self, field: str, arrays: dict) -> None:
        """Restore a graph from a checkpoint; a graph that fails validation is rebuilt."""
        f = self.schema.fields[field]
        try:
            self.vector_indexes[field] = VectorIndex.from_arrays(
                field, f.width, f.metric, f.vector_index, arrays, self.n)
        except (ValueError, KeyError):
            self.vector_indexes[field] = VectorIndex(field, f.width, f.metric, f.vector_index)

    def load_text_index(self, field: str, arrays: dict) -> None:
        """Restore a full-text index from a checkpoint (no text is analyzed again);
        one that fails validation is rebuilt from the column."""
        f, n = self.schema.fields[field], self.n
        ix = make_text_index(field, f)
        try:
            if not arrays:
                raise ValueError("no arrays")
            ix = FtsIndex.from_arrays(field, ix.analyzer, f.k1, f.b, arrays, n)
        except (ValueError, KeyError):
            col = self.columns[field]
            if n:
                ix.extend(0, n, col.codes.data[:n], col.words)
        self.text_indexes[field] = ix

    def link_indexes(self) -> bool:
        """Link the next chunk of committed rows into each graph; False if none was left."""
        moved = 0
        # columns first: a schema change replaces vector_indexes before (drop) or
        # after (add) columns, so a field found in both here is one column's
        columns = self.columns
        for name, vi in list(self.vector_indexes.items()):
            col = columns.get(name)
            if col is not None:
                moved += vi.link(col, self.committed_n)
        return moved > 0


def make_text_index(name: str, f: Field) -> FtsIndex:
    """An empty full-text index for an fts text field, with the field's options."""
    from ..text.analyzer import Analyzer
    return FtsIndex(name, Analyzer(f.stem), k1=f.k1, b=f.b)


def check_unique(keys: list) -> None:
    """DuplicateIdError if a key appears twice in one batch."""
    if len(set(keys)) != len(keys):
        seen = set()
        dup = next(k for k in keys if k in seen or seen.add(k))
        raise DuplicateIdError(f"id {dup!r} appears twice in one batch")
