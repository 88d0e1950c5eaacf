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

from dataclasses import replace

import numpy as np

from ..index.scalar import make_scalar_index
from ..index.vector_index import VectorIndex
from ..schema import HNSW, Schema
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
        self.live: dict = {}
        self.next_int_id = 1
        self.indexes = {name: make_scalar_index(name, f)     # scalar field -> index
                        for name, f in schema.fields.items() if f.index}
        self.vector_indexes: dict[str, VectorIndex] = {}
        for name, f in schema.fields.items():
            if f.kind == "vector" and f.vector_index is not None:
                self.vector_indexes[name] = VectorIndex(name, f.dim, f.metric, f.vector_index)
        self.committed_n = 0                   # rows of committed versions (a prefix)
        self._mask_cache: dict = {}            # field or None -> (version, n, mask, count)
        self._undo: list | None = None         # set while a transaction is open

    @property
    def n(self) -> int:
        return self.born.n

    # ---- reading -------------------------------------------------------------

    def visible(self, version: int, n: int | None = None, final: bool = False) -> np.ndarray:
        """Read-only boolean mask over row versions [0, n) (default: all): visible
        as of `version`. Combine it into a new array; never write to it.

        A reader takes `n` once and passes it to every column it reads, so
        all its masks have one length while the writer appends. `final` says
        the version is committed, so the mask may be cached for the next reader."""
        if n is None:
            n = self.born.n
        return self._mask(None, version, n, final)[0]

    def searchable(self, field: str, version: int, n: int, final: bool = False
                   ) -> tuple[np.ndarray, int]:
        """(read-only mask, count) of rows visible as of `version` with a non-null `field`."""
        return self._mask(field, version, n, final)

    def _mask(self, field: str | None, version: int, n: int, final: bool
              ) -> tuple[np.ndarray, int]:
        # Visibility as of a committed version never changes (later writes only
        # append rows born later and stamp `died` with later versions), and a
        # row's nulls never change, so a committed version's mask is cached.
        cached = self._mask_cache.get(field)
        if cached is not None and cached[0] == version and cached[1] == n:
            return cached[2], cached[3]
        mask = (self.born.data[:n] <= version) & (self.died.data[:n] > version)
        if field is not None:
            mask &= ~self.columns[field].nulls.data[:n]
        mask.flags.writeable = False
        count = int(np.count_nonzero(mask))
        if final:
            self._mask_cache[field] = (version, n, mask, count)
        return mask, count

    def id_values(self, rows: np.ndarray) -> list:
        if isinstance(self.ids, TextColumn):
            return self.ids.take(rows)[0]
        return self.ids.data[rows].tolist()

    def rows_of_id(self, key, n: int | None = None) -> np.ndarray:
        """Every row version among [0, n) (default: all) written for one document id."""
        if n is None:
            n = self.born.n
        if isinstance(self.ids, TextColumn):
            code = self.ids.code_of(key)
            return np.flatnonzero(self.ids.codes.data[:n] == code)
        return np.flatnonzero(self.ids.data[:n] == key)

    def live_rows(self, keys: list) -> np.ndarray:
        live = self.live
        return np.fromiter((live.get(k, -1) for k in keys), np.int64, len(keys))

    # ---- transactions --------------------------------------------------------

    def begin(self) -> None:
        # n, died rows, live-map ops, next id, vector indexes before the transaction
        self._undo = [self.n, [], [], self.next_int_id, dict(self.vector_indexes), self.schema]

    def end(self) -> None:
        """The transaction committed: its rows are now part of the committed prefix."""
        self._undo = None
        self.committed_n = self.n

    def rollback(self) -> None:
        n0, died_rows, live_undo, next_id, vector_indexes, schema = self._undo
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
        for ix in self.indexes.values():
            ix.truncate(n0)
        self._undo = None

    # ---- applying frames -----------------------------------------------------

    def apply_insert(self, meta: dict, arrays: dict, offsets: dict, version: int) -> None:
        first, count = meta["first"], meta["n"]
        assert first == self.n, f"insert frame starts at row {first}, table has {self.n}"
        if isinstance(self.ids, TextColumn):
            keys = meta["ids"]
            self.ids.append(keys)
        else:
            id_arr = arrays["ids"]
            self.ids.append(id_arr)
            keys = id_arr.tolist()
            if count:
                self.next_int_id = max(self.next_int_id, int(id_arr.max()) + 1)
        self.died.append(np.full(count, ALIVE, np.int64))
        present = set(meta["fields"])
        for name, col in self.columns.items():
            if name not in present:
                col.append_nulls(count)
            elif isinstance(col, VectorColumn):
                off = offsets.get(f"v:{name}")
                col.append(arrays[f"v:{name}"], arrays[f"n:{name}"], off)
            elif name in meta.get("lists", {}):
                col.append(meta["lists"][name])
            else:
                col.append(arrays[f"v:{name}"], arrays[f"n:{name}"])
        if self._undo is not None:
            self._undo[2].append((True, keys, None))
        self.live.update(zip(keys, range(first, first + count)))
        for ix in self.indexes.values():
            ix.extend(self, first, first + count)
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

    def create_index(self, field: str, spec: dict, version: int) -> None:
        """Apply a CREATE_INDEX frame: the graph starts empty and is linked after commit."""
        f = self.schema.fields[field]
        hnsw = HNSW(spec["m"], spec["ef_construction"], spec["ef_search"])
        fields = dict(self.schema.fields)
        fields[field] = replace(f, vector_index=hnsw)
        self.schema = Schema(fields, self.schema.id_kind)
        self.vector_indexes = {**self.vector_indexes,
                               field: VectorIndex(field, f.dim, f.metric, hnsw)}

    def load_vector_index(self, field: str, arrays: dict) -> None:
        """Restore a graph from a checkpoint; a graph that fails validation is rebuilt."""
        f = self.schema.fields[field]
        try:
            self.vector_indexes[field] = VectorIndex.from_arrays(
                field, f.dim, f.metric, f.vector_index, arrays, self.n)
        except (ValueError, KeyError):
            self.vector_indexes[field] = VectorIndex(field, f.dim, f.metric, f.vector_index)

    def link_indexes(self) -> bool:
        """Link the next chunk of committed rows into each graph; False if none was left."""
        moved = 0
        for name, vi in list(self.vector_indexes.items()):
            moved += vi.link(self.columns[name], self.committed_n)
        return moved > 0
