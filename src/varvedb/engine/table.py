"""A collection's in-memory state: row versions, their columns, and the live id map.

Why this layout: every write appends row versions and never edits one, except
to stamp `died`. A row version is visible as of version v when
`born <= v < died`, so a writer can apply an uncommitted transaction in place,
tagged with the next version, and readers at the committed version never see
it — no locks and no copies. Rolling back truncates the appended rows and
unstamps `died` (the undo log).

Invariants:
* every column, `ids`, `born` and `died` have exactly `n` rows;
* `live` maps each document id to its row alive on the writer's branch (its
  view, including its open transaction); at most one such row per id;
* with branches (branches.py): `branch_of` holds each row's birth branch (None
  while every row was born on main), `died` is stamped by that branch only,
  and `deaths[b]` lists the rows of b's ancestors that b deleted;
* frames are applied identically live and on replay, so the state after
  reopen equals the state before close.
"""
from __future__ import annotations

import copy
import threading
import uuid
from dataclasses import replace
from types import MappingProxyType
from typing import NamedTuple

import numpy as np

from ..errors import DuplicateIdError
from ..index.fts import FtsIndex
from ..index.protocol import SCALAR_KINDS, TEXT_KINDS, VECTOR_KINDS, Index
from ..index.scalar import make_scalar_index
from ..index.vector_index import make_vector_index
from ..schema import HNSW, ID_END, Field, Schema, coerce_ids, index_shape
from .branches import HEAD, MAIN, View, main_view
from .columns import (DerivedColumn, Growable, TextColumn, VectorColumn, make_column,
                      predicate_mask, range_error, unindexable)

ALIVE = np.iinfo(np.int64).max


class Undo(NamedTuple):
    """What a transaction changed, to put back on rollback. Schema changes
    replace the schema, the columns and the index map, never edit them, so the
    ones before the transaction are kept whole."""
    n: int                   # rows before it
    died_rows: list          # arrays of rows it stamped `died` on
    live_ops: list           # (added, keys, rows) changes of the live map, in order
    next_int_id: int
    schema: Schema
    columns: dict
    indexes: dict            # (field, kind) -> Index
    branch_of: object        # Growable | None
    deaths_n: dict           # branch -> its deaths' length


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
        self._lives: dict[int, dict] = {MAIN: {}}   # branch -> its live map (see `live`)
        self.writer_view = main_view(HEAD)     # the writing branch's view (set by the engine)
        self.branch_of: Growable | None = None     # int32 birth branch, once one is not main
        self.deaths: dict[int, tuple[Growable, Growable]] = {}   # branch -> (rows, versions)
        self._live_lock = threading.Lock()
        self.next_int_id = 1
        self._set_indexes({(name, kind): ix for name, f in schema.fields.items()
                           for kind, ix in field_indexes(name, f)})
        self.committed_n = 0                   # rows of committed versions (a prefix)
        self.rowmap = None                     # the log's numbering, once vacuumed (rowmap.py)
        self._mask_cache: dict = {}            # field or None -> (version, n, mask, count)
        self._undo: Undo | None = None         # set while a transaction is open
        self.prepared: dict = {}               # searches bound once (query/prepared.py)

    # ---- indexes (index/protocol.py) ---------------------------------------------
    # One map (field, kind) -> Index, replaced whole on every change (the undo
    # keeps the old one); `indexes`, `text_indexes` and `vector_indexes` are
    # read-only views of it by family, field -> index, made with it. A vector
    # field's further indexes (Field.more_indexes) are keyed (field, "@" + their
    # name), in none of the views: `vector_choices` gives them, its own first.

    def _set_indexes(self, by_key: dict) -> None:
        def family(kinds):
            return MappingProxyType({f: ix for (f, k), ix in by_key.items() if k in kinds})
        self._indexes = by_key
        # the maintainer's (read at every commit: deferred_behind)
        self._deferred = tuple(ix for ix in by_key.values() if not ix.in_step)
        self._in_step = tuple((name, ix) for (name, _), ix in by_key.items() if ix.in_step)
        self.indexes = family(SCALAR_KINDS)
        self.text_indexes = family(TEXT_KINDS)
        self.vector_indexes = family(VECTOR_KINDS)

    def index_items(self) -> tuple:
        """((label, index), ...) of every index: the label is its field's current
        name, "field@name" for a field's further vector index."""
        return tuple((f + k if k[0] == "@" else f, ix) for (f, k), ix in self._indexes.items())

    def set_index(self, field: str, ix: Index, kind: str | None = None) -> None:
        """Add `ix` to `field`, in place of the field's index of the same family
        (kind "@" + a name: in place of the field's further vector index of that name)."""
        if kind is not None and kind[0] == "@":
            self._set_indexes({**self._indexes, (field, kind): ix})
            return
        kinds = _family_of(ix.kind)
        self._set_indexes({**{key: old for key, old in self._indexes.items()
                              if key[0] != field or key[1] not in kinds},
                           (field, ix.kind): ix})

    def put_index(self, label: str, ix: Index) -> None:
        """`ix` in place of the index `label` (index_items') names."""
        field, at, name = label.partition("@")
        self.set_index(field, ix, at + name if at else None)

    def vector_choices(self, field: str) -> list:
        """[(name, index), ...]: the field's vector indexes, its own first (name "")
        and then its further ones (Field.more_indexes), by their names."""
        own = self.vector_indexes.get(field)
        if own is None:
            return []
        f = self.schema.fields[field]
        return [("", own), *((s.name, self._indexes[field, "@" + s.name])
                             for s in f.more_indexes)]

    def vector_index_of(self, field: str, name: str = ""):
        """The field's vector index `name` (vector_choices'), "" its own; None: none."""
        return self._indexes.get((field, "@" + name)) if name else \
            self.vector_indexes.get(field)

    def _drop_indexes(self, field: str, kinds: tuple) -> None:
        self._set_indexes({key: ix for key, ix in self._indexes.items()
                           if key[0] != field or key[1] not in kinds})

    def text_index(self, field: str, n: int):
        """The field's full-text index over rows [0, n): the index, or, for rows the
        maintainer has not indexed yet, a copy that adds them (FtsIndex.covering)."""
        return self.text_indexes[field].covering(self.columns[field], n,
                                                 keep=n <= self.committed_n)

    def index_text_now(self) -> None:
        """Extend the full-text indexes over every committed row, in the calling
        thread: a connection with no maintainer (read-only) after it loads or
        refreshes, so its reads do not analyze the same new rows again and again."""
        for name, ix in self.text_indexes.items():
            col = self.columns[name]
            while ix.extend(col, self.committed_n):
                pass

    def deferred_behind(self) -> bool:
        """Has a deferred index fewer rows than are committed (the maintainer's work)?"""
        n = self.committed_n
        for ix in self._deferred:
            if ix.indexed < n:
                return True
        return False

    @property
    def live(self) -> dict:
        """Document id -> its live row on the writer's branch. Each branch's map is
        changed only by that branch's writes, so one is kept per branch used; a
        table loaded from a checkpoint builds it on first use: for millions of
        rows the dict is hundreds of MB that a reader which only searches never
        needs (and a capped one cannot spare)."""
        b = self.writer_view.branch
        live = self._lives.get(b)
        if live is None:
            with self._live_lock:
                live = self._lives.get(b)
                if live is None:
                    alive = np.flatnonzero(self.alive_mask(self.n))
                    live = self._lives[b] = dict(zip(self.id_values(alive), alive.tolist()))
        return live

    def drop_live_maps(self) -> None:
        """Forget every branch's live map: each is built again on first use."""
        self._lives = {}

    @property
    def built_live_maps(self) -> tuple:
        """The branches whose live map is built (a loaded table has none until used)."""
        return tuple(self._lives)

    def use_view(self, view: View) -> None:
        """The writer now writes (or replays) the branch of `view` (its cut: HEAD)."""
        self.writer_view = view

    def forget_branches(self, known) -> None:
        """Drop the live maps of branches not in `known` (a rolled-back branch's id is
        handed out again) and write main until the engine says otherwise."""
        self._lives = {b: m for b, m in self._lives.items() if b in known}
        self.writer_view = main_view(HEAD)

    def alive_mask(self, n: int) -> np.ndarray:
        """Rows [0, n) alive on the writer's branch, its open transaction included."""
        if self.branch_of is None and self.writer_view.main_only:
            return self.died.data[:n] == ALIVE
        return self.view_mask(self.writer_view, n)

    def view_mask(self, view: View, n: int) -> np.ndarray:
        births = self.branch_of.data[:n] if self.branch_of is not None else None
        mask = _born_in(view, self.born.data[:n], self.died.data[:n], births)
        for gone in self._deaths_in(view):
            mask[gone[gone < n]] = False
        return mask

    def _deaths_in(self, view: View):
        """For each branch of the view that deleted its ancestors' rows: those rows,
        as far as the view sees that branch."""
        for b, cut in view.segments:
            d = self.deaths.get(b)
            if d is not None:
                k = min(d[0].n, d[1].n)      # a writer appends rows, then versions
                yield d[0].data[:k][d[1].data[:k] <= cut]
    @property
    def n(self) -> int:
        return self.born.n

    def memory_bytes(self) -> dict[str, int]:
        """Bytes of the arrays this table holds, by part (the server's metrics):
        rows (ids, born, died), columns, vector graphs, text and scalar indexes,
        and the searches kept in `prepared` (the most each holds: its mask, its
        exact scan's scratch and float16 copy). Arrays mapped from the file count
        too (their pages are the OS's to keep)."""
        rows = _grown_bytes(self) + (_grown_bytes(self.ids)
                                     if isinstance(self.ids, TextColumn) else 0)
        return {"rows": rows, "columns": sum(_grown_bytes(c) for c in self.columns.values()),
                "vector_indexes": sum(vi.nbytes() for _, vi in self.index_items()
                                      if vi.PREFIX == "vx"),
                "text_indexes": sum(ix.nbytes() for ix in self.text_indexes.values()),
                "scalar_indexes": sum(ix.nbytes() for ix in self.indexes.values()),
                "prepared_searches": sum(p.nbytes for p in list(self.prepared.values()))}

    def id_bytes(self) -> int:
        """Bytes of the id column, what a lookup by id reads (SQL's primary key
        index; counted in memory_bytes' rows too)."""
        return _grown_bytes(self.ids) if isinstance(self.ids, TextColumn) else self.ids.data.nbytes

    # ---- reading -------------------------------------------------------------

    def visible(self, view: View, n: int, final: bool = False, nonnull: str | None = None
                ) -> tuple[np.ndarray, int]:
        """(read-only mask, count) over row versions [0, n): visible in `view` (a
        branch as of a version: branches.py) and with a non-null `nonnull` field.
        Combine the mask into a new array; never write to it.

        Readers get here through a Snapshot, which takes `n` once, after the
        version, so all its masks have one length while the writer appends.
        `final` says the version is committed, so the mask may be cached for
        the next reader."""
        # Visibility as of a committed version never changes (later writes only
        # append rows born later and stamp `died` with later versions), and a
        # row's nulls never change, so a committed version's mask is cached.
        cached = self._mask_cache.get(nonnull)
        if cached is not None and cached[0] == view and cached[1] == n:
            return cached[2], cached[3]
        mask = self.view_mask(view, n)
        if nonnull is not None:
            mask &= ~self.columns[nonnull].nulls_head(n)
        mask.flags.writeable = False
        count = int(np.count_nonzero(mask))
        if final:
            self._mask_cache[nonnull] = (view, n, mask, count)
        return mask, count

    def rows_visible(self, rows: np.ndarray, view: View) -> np.ndarray:
        """Which of `rows` (row numbers below n) are visible in `view`: a mask."""
        rows = np.asarray(rows, np.int64)
        births = self.branch_of.data[rows] if self.branch_of is not None else None
        ok = _born_in(view, self.born.data[rows], self.died.data[rows], births)
        for gone in self._deaths_in(view):
            ok &= ~np.isin(rows, gone)
        return ok

    def visible_row(self, key, view: View, n: int) -> int:
        """The row of document `key` visible in `view` among [0, n), or -1.

        The live map is tried first: its row is the answer when it is visible
        in this view (at most one row of an id is visible in any view), which
        is every read of the writer's branch as it is now. Otherwise (an older
        version, another branch, or a row the writer has replaced or deleted but
        not committed) every row written for the id is looked at."""
        r = self.live.get(key)
        if r is not None and r < n:
            if self.branch_of is None and view.main_only:   # no branch: two compares
                if self.born.data.item(r) <= view.version < self.died.data.item(r):
                    return r
            elif self.rows_visible(np.array([r]), view)[0]:
                return r
        rows = self.rows_of_id(key, n)
        rows = rows[self.rows_visible(rows, view)]
        return int(rows[0]) if len(rows) else -1

    def row_history(self, key, view: View, n: int) -> tuple[np.ndarray, list, list]:
        """(rows, born, deleted) of every version of document `key` in `view`'s
        line, oldest first; deleted is the version that ended it there, or None."""
        rows = self.rows_of_id(key, n)
        births = (self.branch_of.data[rows].tolist() if self.branch_of is not None
                  else [MAIN] * len(rows))
        born = self.born.data[rows].tolist()
        keep = [i for i, (b, v) in enumerate(zip(births, born)) if view.holds(b, v)]
        rows = rows[keep]
        deleted = []
        for row, b in zip(rows.tolist(), [births[i] for i in keep]):
            gone = self.died.data.item(row)
            ends = [gone] if gone != ALIVE and view.holds(b, gone) else []
            for d, cut in view.segments:
                pair = self.deaths.get(d)
                if pair is not None:
                    k = min(pair[0].n, pair[1].n)
                    hit = np.flatnonzero(pair[0].data[:k] == row)
                    ends += [v for v in pair[1].data[hit].tolist() if v <= cut]
            deleted.append(min(ends) if ends else None)
        return rows, [born[i] for i in keep], deleted

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

    def rows_of_ids(self, keys: list, mask: np.ndarray) -> np.ndarray:
        """The row of each document id of `keys` among the rows `mask` allows (a
        bool mask over [0, len(mask)): a view's visible rows, filtered), or -1.
        At most one row of an id is visible in any view: the live map's row is
        tried first, and the ids it does not answer are matched against the
        allowed rows' ids in one sorted pass."""
        n = len(mask)
        rows = self.live_rows(keys)
        ok = (rows >= 0) & (rows < n)
        ok[ok] = mask[rows[ok]]
        if ok.all():
            return rows
        rows[~ok] = -1
        todo = np.flatnonzero(~ok)
        allowed = np.flatnonzero(mask)
        if isinstance(self.ids, TextColumn):
            have = self.ids.codes.data[allowed]
            want = np.array([self.ids.code_of(keys[i]) for i in todo.tolist()], np.int64)
        else:
            have = self.ids.data[allowed]
            want = np.array([keys[i] for i in todo.tolist()], np.int64)
        if not len(allowed):
            return rows
        order = np.argsort(have, kind="stable")
        pos = np.minimum(np.searchsorted(have[order], want), len(order) - 1)
        hit = have[order[pos]] == want
        rows[todo[hit]] = allowed[order[pos[hit]]]
        return rows

    def live_rows(self, keys: list) -> np.ndarray:
        live = self.live
        return np.fromiter((live.get(k, -1) for k in keys), np.int64, len(keys))

    # ---- transactions --------------------------------------------------------

    @property
    def undo(self) -> Undo | None:
        """What the open transaction changed (None outside one)."""
        return self._undo

    def begin(self) -> None:
        self._undo = Undo(self.n, [], [], self.next_int_id, self.schema, self.columns,
                          self._indexes, self.branch_of,
                          {b: d[0].n for b, d in self.deaths.items()} if self.deaths else {})

    def end(self) -> None:
        """The transaction committed: its rows are now part of the committed prefix."""
        self._undo = None
        self.committed_n = self.n

    def rollback(self) -> None:
        u = self._undo
        n0, branch_of, deaths_n = u.n, u.branch_of, u.deaths_n
        if u.schema is not self.schema:
            self._mask_cache = {}
        self.columns, self.schema = u.columns, u.schema
        self._set_indexes(u.indexes)
        self.branch_of = branch_of
        for col in [self.born, self.died, self.ids, *self.columns.values()]:
            col.truncate(n0)
        if branch_of is not None:
            branch_of.truncate(n0)
        for b in list(self.deaths):
            if b not in deaths_n:
                del self.deaths[b]
            else:
                for part in self.deaths[b]:
                    part.truncate(deaths_n[b])
        if u.died_rows:
            self.died.set(np.concatenate(u.died_rows), ALIVE)
        for added, keys, rows in reversed(u.live_ops):
            if added:
                for k in keys:
                    self.live.pop(k, None)
            else:
                self.live.update(zip(keys, rows))
        self.next_int_id = u.next_int_id
        for ix in self._indexes.values():
            if ix.in_step:      # a deferred one holds committed rows only
                ix.truncate(n0)
            elif getattr(ix, "derived", None) is not None:   # (its reads' rows, not its own)
                ix.derived.truncate(n0)
        self._undo = None

    # ---- applying frames -----------------------------------------------------

    def fresh_ids(self, n: int) -> list | np.ndarray:
        """`n` new ids, none given (a column-wise insert's): fresh uuids for text
        ids, else the int64 range above every id used so far, made whole (what
        assign_ids([None] * n) gives, without a Python value a row)."""
        start = self.next_int_id
        if self.schema.id_kind == "text" or start + n > ID_END:
            return self.assign_ids([None] * n)
        return np.arange(start, start + n, dtype=np.int64)

    def assign_ids(self, raw: list) -> list | np.ndarray:
        """Ids for a batch of rows, None where the caller gave none: fresh uuids
        for text ids, else integers above every id used so far (or given)."""
        if len(raw) == 1 and raw[0] is not None:      # a one-row write that names its id
            return coerce_ids(self.schema, raw)
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
        live = self.live
        if not live.keys().isdisjoint(keys):
            dup = next(k for k in keys if k in live)
            raise DuplicateIdError(f"id {dup!r} already exists in {self.name!r}")

    def apply_insert(self, frame, version: int) -> None:
        """Apply an Insert frame (frames.py): its rows are born at `version`, on
        the writer's branch."""
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
                top = keys[0] if count == 1 else int(id_arr.max())
                self.next_int_id = max(self.next_int_id, top + 1)
        self.died.fill(ALIVE, count)
        branch = self.writer_view.branch
        if branch != MAIN and self.branch_of is None:
            self.branch_of = Growable(np.int32)
            self.branch_of.fill(0, first)
        if self.branch_of is not None:
            self.branch_of.fill(branch, count)
        present = frame.columns
        for name, col in self.columns.items():
            if name not in present:
                col.append_nulls(count)
            elif isinstance(col, VectorColumn):
                vals, nulls = present[name]
                col.append(vals, nulls, frame.offset(name))
            else:
                vals, nulls = present[name]
                if isinstance(vals, list):
                    col.append(vals)
                else:
                    col.append(vals, nulls)
        if self._undo is not None:
            self._undo.live_ops.append((True, keys, None))
        if count == 1:
            self.live[keys[0]] = first
        else:
            self.live.update(zip(keys, range(first, first + count)))
        columns = self.columns
        for name, ix in self._in_step:
            ix.extend(columns[name], first + count)
        # `born` goes last: its length is the table's `n`, and readers running
        # beside the writer slice every other column to that n, so each must
        # already hold the new rows (else masks of different lengths, or codes
        # read from unwritten memory).
        self.born.fill(version, count)

    def apply_delete(self, rows: np.ndarray, version: int) -> None:
        """Apply a Delete frame on the writer's branch: its own rows get `died`,
        its ancestors' rows go to its own list of deaths (they live on there)."""
        if not len(rows):
            return
        rows = np.asarray(rows, np.int64)
        own = rows
        if self.branch_of is not None or not self.writer_view.main_only:
            births = (self.branch_of.data[rows] if self.branch_of is not None
                      else np.zeros(len(rows), np.int32))
            mine = births == self.writer_view.branch
            own, theirs = rows[mine], rows[~mine]
            if len(theirs):
                d = self.deaths.get(self.writer_view.branch)
                if d is None:
                    d = self.deaths[self.writer_view.branch] = (Growable(np.int64),
                                                                Growable(np.int64))
                d[0].append(theirs)
                d[1].append(np.full(len(theirs), version, np.int64))
        self.died.set(own, version)
        keys = self.id_values(rows)
        if self._undo is not None:
            self._undo.died_rows.append(np.array(own, np.int64))
            self._undo.live_ops.append((False, keys, rows.tolist()))
        # Writers delete only live rows, and an upsert writes its delete
        # before its insert, so each deleted row is its id's live row.
        live = self.live
        for key in keys:
            live.pop(key, None)

    # ---- vector indexes --------------------------------------------------------

    def create_index(self, field: str, hnsw: HNSW, version: int) -> None:
        """Apply a CreateIndex frame: the graph starts empty and is linked after
        commit. On a field indexed already, a further index (Field.more_indexes),
        of its own metric: the field's stays its first index's."""
        f = self.schema.fields[field]
        if f.vector_index is not None:
            f = replace(f, more_indexes=(*f.more_indexes, hnsw))
            self._set_schema({**self.schema.fields, field: f})
            spec = f.more_indexes[-1]
            self.set_index(field, field_vector_index(field, f, spec), "@" + spec.name)
            return
        # an SQL operator class names the metric: the field's, unless the index is
        # over an expression of it (whose metric is the index's own)
        # (nor l1's, which ranks a graph of l2 neighbours: the field's metric is one
        # a graph is built for)
        if hnsw.metric not in (None, "l1") and getattr(hnsw, "expr", None) is None:
            f = replace(f, metric=hnsw.metric)
        fields = dict(self.schema.fields)
        fields[field] = f = replace(f, vector_index=hnsw)
        self.schema = replace(self.schema, fields=fields)
        self.set_index(field, field_vector_index(field, f))

    def index_column(self, field: str, n: int, ix=None, col=None):
        """What the field's vector index `ix` (None: its own) holds, over rows
        [0, n): the field's column, or for an index on an expression or with a
        predicate its DerivedColumn (kept on the index, derived as far as n's
        committed rows)."""
        col = self.columns[field] if col is None else col
        ix = self.vector_indexes.get(field) if ix is None else ix
        spec = None if ix is None else ix.spec
        if getattr(spec, "expr", None) is None and getattr(spec, "where", None) is None:
            return col
        d = ix.derived
        if d is None or d.source is not col:
            def predicate():    # the schema's: a renamed column's new name, at this state
                f = self.schema.fields.get(field)
                return self.columns, getattr(f and f.vector_spec(spec.name), "where",
                                             None) or spec.where
            d = ix.derived = DerivedColumn(col, spec, predicate, lambda: self.committed_n)
        return d.fill(n)

    def check_index_values(self, columns: dict, n: int) -> None:
        """VectorRangeError (22003) when one of n new rows (a write's columns:
        field -> (values, nulls)) holds a vector that its field's expression index
        cannot hold (unindexable), as PostgreSQL refuses the write: checked before
        any frame is written, so nothing of the write is applied."""
        for name in self.schema.half_indexed:
            if name not in columns:
                continue
            for spec in self.schema.fields[name].vector_specs:
                self._check_values(name, spec, columns, n)

    def _check_values(self, name: str, spec, columns: dict, n: int) -> None:
        """VectorRangeError where one of the write's rows of `name` is one `spec` cannot hold."""
        vals, nulls = columns[name]
        if nulls is None:
            nulls = np.zeros(n, bool)

        def meets():    # the write's rows meeting the predicate, as columns of their own
            cols = {}
            for field, _, _ in spec.where:
                cols[field] = col = make_column(self.schema.fields[field])
                if field in columns:
                    col.append(*columns[field])
                else:
                    col.append_nulls(n)
            return predicate_mask(cols, spec.where, 0, n)
        rows = unindexable(spec, np.asarray(vals), np.asarray(nulls, bool), meets)
        if len(rows):
            raise range_error(name, spec, vals[rows[0]], f"row {int(rows[0])} of the write")

    def unindexable_rows(self, field: str, spec) -> np.ndarray:
        """The rows so far (committed or the transaction's) whose `field` vector the
        index `spec` cannot hold (columns.unindexable)."""
        col, n = self.columns[field], self.n
        return unindexable(spec, col.arena.head(n), col.nulls.head(n),
                           lambda: predicate_mask(self.columns, spec.where, 0, n))

    # ---- schema changes (each applies one DDL frame; no row is rewritten) ----------
    # The schema is the current one for every read, as_of included: a renamed
    # field reads under its new name, a dropped one is gone for every version,
    # and an added one reads its default (or null) for the rows written before it.
    # Each replaces the dicts it changes (the undo keeps the old ones), filling
    # a new column before the schema names it, for readers beside the writer.

    def _set_schema(self, fields: dict) -> None:
        self._mask_cache = {}      # keyed by field name, which may now mean another column
        # a column added, dropped or renamed keeps the id's kind and CREATE TABLE's flags
        self.schema = replace(self.schema, fields=fields)

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
        for kind, ix in field_indexes(name, f):
            if ix.in_step:      # a deferred one is filled by the maintainer
                ix.extend(col, n)
            self.set_index(name, ix, kind)
        self._set_schema({**self.schema.fields, name: f})

    def drop_column(self, name: str) -> None:
        # a partial index whose predicate reads the column goes with it (PostgreSQL's rule)
        fields = {}
        for k, f in self.schema.fields.items():
            if k == name:
                continue
            keep = [spec for spec in f.vector_specs
                    if not any(c[0] == name for c in getattr(spec, "where", None) or ())]
            fields[k] = f if len(keep) == len(f.vector_specs) else \
                self._keep_vector_indexes(k, keep)
        self._set_schema(fields)
        self._set_indexes({key: ix for key, ix in self._indexes.items() if key[0] != name})
        self.columns = {k: c for k, c in self.columns.items() if k != name}

    def _keep_vector_indexes(self, field: str, keep: list) -> Field:
        """The field with only the vector indexes of its specs `keep` (in their
        order), each the same index object as before; the first becomes its own
        index, ranking by its own metric still: the field keeps its metric (what a
        search that names none ranks by). Sets the index map; the caller sets the
        schema."""
        f = self.schema.fields[field]
        objects = dict(zip(map(id, f.vector_specs), (ix for _, ix in self.vector_choices(field))))
        kept = [(spec, objects[id(spec)]) for spec in keep]
        by_key = {key: ix for key, ix in self._indexes.items()
                  if key[0] != field or not (key[1] in VECTOR_KINDS or key[1][0] == "@")}
        if not kept:
            self._set_indexes(by_key)
            return replace(f, vector_index=None, more_indexes=())
        (first, ix), rest = kept[0], kept[1:]
        by_key[field, ix.kind] = ix
        by_key.update(((field, "@" + spec.name), ix) for spec, ix in rest)
        self._set_indexes(by_key)
        return replace(f, vector_index=first, more_indexes=tuple(spec for spec, _ in rest))

    def set_check(self, name: str, check: tuple | None) -> None:
        """The field's CHECK conditions are `check` (no row rewritten: the writer
        checked the rows already there)."""
        self._set_schema({k: replace(f, check=check) if k == name else f
                          for k, f in self.schema.fields.items()})

    def rename_column(self, old: str, new: str) -> None:
        def renamed(d: dict) -> dict:   # in the same place: the field order is kept
            return {new if k == old else k: v for k, v in d.items()}
        self.columns = renamed(self.columns)
        by_key = {}
        for (f, kind), ix in self._indexes.items():
            if f == old:
                if ix.in_step:       # the undo keeps the old one as it was
                    ix = copy.copy(ix)
                    ix.field = new
                # a deferred one is the maintainer's to extend: one object, which
                # keeps the name it was made under (the key is the field's name)
                f = new
            by_key[f, kind] = ix
        self._set_indexes(by_key)
        # a vector filled from the renamed text field now names it as its source, and
        # a partial index's predicate the column by its new name
        fields = {}
        for k, f in renamed(self.schema.fields).items():
            if f.source == old:
                f = replace(f, source=new)
            if any(c[0] == old for spec in f.vector_specs
                   for c in getattr(spec, "where", None) or ()):
                # (what DerivedColumn reads)
                specs = [_renamed_where(spec, old, new) for spec in f.vector_specs]
                f = replace(f, vector_index=specs[0], more_indexes=tuple(specs[1:]))
            fields[k] = f
        self._set_schema(fields)

    def create_scalar_index(self, field: str, kind: str, name: str | None = None,
                            ts_config: str | None = None) -> None:
        """A "hash" or "sorted" index on a scalar field, built over every row so far;
        "fts": a full-text index analyzed as `ts_config`, which the maintainer extends
        over the rows so far (reads cover what it has not reached)."""
        if kind == "fts":
            f = replace(self.schema.fields[field], fts=True, ts_config=ts_config)
            self.set_index(field, make_text_index(field, f))
            self._set_schema({**self.schema.fields, field: f})
            return
        f = replace(self.schema.fields[field], index=kind, index_name=name)
        self.set_index(field, self._built_index(field, f))
        self._set_schema({**self.schema.fields, field: f})

    def drop_index(self, field: str, index: str | None = None) -> None:
        """Drop the field's vector index named `index` (None: its own; a further one
        then takes its place) or its scalar index."""
        f = self.schema.fields[field]
        if field in self.vector_indexes:
            gone = f.vector_index if index is None else f.vector_spec(index)
            f = self._keep_vector_indexes(field, [s for s in f.vector_specs if s is not gone])
        else:
            f = replace(f, index=None, index_name=None)
            self._drop_indexes(field, SCALAR_KINDS)
        self._set_schema({**self.schema.fields, field: f})

    def _built_index(self, name: str, f: Field):
        """A scalar index over the rows so far (the column must be in self.columns)."""
        ix = make_scalar_index(name, f)
        if self.n:
            ix.n = self.n
            ix.merge(self.columns[name])
        return ix

    def load_index(self, label: str, ix: Index, arrays: dict) -> Index:
        """Restore the index `label` (index_items' `ix`) from a checkpoint's arrays
        (no text analyzed, no graph linked again); one that does not fit starts
        empty, and is built again: now if it is kept in step, else by the maintainer."""
        try:
            ix = ix.loaded(arrays, self.n)
        except (ValueError, KeyError):
            ix = ix.fresh()
            if ix.in_step and self.n:
                ix.extend(self.columns[label], self.n)
        self.put_index(label, ix)
        return ix

    def unlinked(self) -> int:
        """Committed rows the furthest-behind deferred index lacks (0: none)."""
        n = self.committed_n
        return max([0, *(n - ix.indexed for ix in self._deferred)])

    def link_indexes(self) -> int:
        """Extend each deferred index by the next chunk of committed rows; the rows
        added (over all of them), 0 if none was left."""
        moved = 0
        # columns first: a schema change replaces the indexes before (drop) or
        # after (add) columns, so a field found in both here is one column's
        columns = self.columns
        for (name, _), ix in self._indexes.items():
            if not ix.in_step:
                col = columns.get(name)
                if col is not None:
                    if ix.PREFIX == "vx":
                        col = self.index_column(name, self.committed_n, ix, col)
                    moved += ix.extend(col, self.committed_n)
        return moved


def _born_in(view: View, born: np.ndarray, died: np.ndarray, births: np.ndarray | None
             ) -> np.ndarray:
    """Rows whose birth branch's segment of the view holds their birth and not
    their death (`births` None: every row was born on main)."""
    if births is None:
        cut = view.segments[0][1]
        return (born <= cut) & (died > cut)
    mask = np.zeros(len(born), bool)
    for b, cut in view.segments:
        mask |= (births == b) & (born <= cut) & (died > cut)
    return mask


def field_vector_index(name: str, f: Field, spec=None):
    """The empty vector index of a field's spec (None: its own index's): over the
    field's vectors, or over its index expression's (their width, the index's
    metric). Each ranks by its spec's metric, the field's where it names none (a
    further index promoted to the field's own keeps its own: _keep_vector_indexes)."""
    spec = f.vector_index if spec is None else spec
    expr = getattr(spec, "expr", None)
    if expr is None:
        return make_vector_index(name, f.width, spec.metric or f.metric, spec)
    dtype, dim = index_shape(spec, f.dtype, f.dim)
    return make_vector_index(name, (dim + 7) // 8 if dtype == "bit" else dim, spec.metric,
                             spec)


def field_indexes(name: str, f: Field) -> list:
    """(kind, index) of the empty indexes a field's spec asks for: scalar,
    full-text, vector (its further vector indexes of kind "@" + their names)."""
    out = []
    if f.index:
        ix = make_scalar_index(name, f)
        out.append((ix.kind, ix))
    if f.fts:
        ix = make_text_index(name, f)
        out.append((ix.kind, ix))
    for spec in f.vector_specs if f.kind == "vector" else ():
        ix = field_vector_index(name, f, spec)
        out.append((ix.kind if spec is f.vector_index else "@" + spec.name, ix))
    return out


def _renamed_where(spec, old: str, new: str):
    """A vector index spec whose predicate names column `old` as `new`."""
    where = getattr(spec, "where", None)
    if not where or not any(c[0] == old for c in where):
        return spec
    return replace(spec, where=tuple((new if c[0] == old else c[0], *c[1:]) for c in where))


def make_text_index(name: str, f: Field) -> FtsIndex:
    """An empty full-text index for an fts text field, with the field's options."""
    from ..text.analyzer import Analyzer
    return FtsIndex(name, Analyzer(f.stem, config=f.ts_config), k1=f.k1, b=f.b)


def _family_of(kind: str) -> tuple:
    for kinds in (SCALAR_KINDS, TEXT_KINDS, VECTOR_KINDS):
        if kind in kinds:
            return kinds
    raise ValueError(f"no index kind {kind!r}")


def check_unique(keys: list) -> None:
    """DuplicateIdError if a key appears twice in one batch."""
    if len(keys) > 1 and len(set(keys)) != len(keys):
        seen = set()
        dup = next(k for k in keys if k in seen or seen.add(k))
        raise DuplicateIdError(f"id {dup!r} appears twice in one batch")


def _grown_bytes(obj) -> int:
    """Bytes of the Growable arrays among obj's attributes."""
    return sum(v.data.nbytes for v in vars(obj).values() if isinstance(v, Growable))
