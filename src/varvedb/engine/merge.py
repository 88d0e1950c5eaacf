"""Diff and merge of two views (branches.py): which ids were added, changed and
deleted between them, and a branch's changes applied onto another as one commit.

A document is compared by content, not by row version: a row copied onto
main by a merge, or an update that wrote the same values, is no change. Ids
are compared as int64 (int ids) or as the codes of their shared dictionary
(text ids: one code per distinct id), so a diff is a few sorted-array passes
over the visible rows, and only rows whose row version differs are compared
column by column.

Merge rule (three-way): the changes of each side since one base, a state
both sides hold, are diffed. The base is the newest such state the catalog
records: after an earlier merge between the two, the side that gave as it
was then (the newer merge's, either way); before any, where their lines meet.
Not the receiving side's merge commit: it also holds that side's own changes,
which the giver never received. Merges through a third branch are not
followed, so there the base is older than need be (a conflict may be
reported that a newer base would settle).
An id changed on both sides to different documents (one side deleting it
counts) is a conflict and nothing is written; otherwise the source's changes
are written onto the target: its deletes, and copies of its new documents.
"""
from __future__ import annotations


import numpy as np

from ..errors import MergeConflictError
from .branches import HEAD, View
from .columns import JsonColumn, TextColumn
from .table import Table
from ..reports import Changes   # noqa: F401  (plain data: reports.py; named here too)


def _keys(t: Table, rows: np.ndarray) -> np.ndarray:
    ids = t.ids
    return ids.codes.data[rows] if isinstance(ids, TextColumn) else ids.data[rows]


def _visible(t: Table, view: View) -> tuple[np.ndarray, np.ndarray]:
    """(keys, rows) of the documents visible in `view`, sorted by key."""
    rows = np.flatnonzero(t.view_mask(view, t.n))
    keys = _keys(t, rows)
    order = np.argsort(keys, kind="stable")
    return keys[order], rows[order]


def same_content(t: Table, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Do rows a[i] and b[i] hold the same document? (ids equal by the caller)"""
    same = np.ones(len(a), bool)
    if not len(a):
        return same
    for col in t.columns.values():
        if isinstance(col, TextColumn):
            same &= col.codes.data[a] == col.codes.data[b]
        elif isinstance(col, JsonColumn):
            items = col.items
            same &= np.fromiter((items[x] == items[y] for x, y in zip(a.tolist(), b.tolist())),
                                bool, len(a))
        else:
            va, na = col.take(a)
            vb, nb = col.take(b)
            # bytes, not values: NaN equals NaN, and what lies under a null is not read
            ba = np.ascontiguousarray(va).view(np.uint8).reshape(len(a), -1)
            bb = np.ascontiguousarray(vb).view(np.uint8).reshape(len(b), -1)
            same &= (na == nb) & (na | (ba == bb).all(axis=1))
    return same


def changes(t: Table, a: View, b: View) -> tuple[Changes, dict]:
    """(Changes from `a` to `b`, id -> its row in b for each id added or changed)."""
    ka, ra = _visible(t, a)
    kb, rb = _visible(t, b)
    common, ia, ib = np.intersect1d(ka, kb, assume_unique=True, return_indices=True)
    moved = ra[ia] != rb[ib]
    differ = np.zeros(len(common), bool)
    differ[moved] = ~same_content(t, ra[ia][moved], rb[ib][moved])
    added = ~np.isin(kb, common, assume_unique=True)
    deleted = ~np.isin(ka, common, assume_unique=True)
    out = Changes(_ids(t, rb[added]), _ids(t, rb[ib][differ]), _ids(t, ra[deleted]))
    new = np.concatenate([rb[added], rb[ib][differ]])
    return out, dict(zip(t.id_values(new), new.tolist()))


def _ids(t: Table, rows: np.ndarray) -> list:
    return sorted(t.id_values(rows))


def diff(engine, a: View, b: View) -> dict[str, Changes]:
    """Collection name -> its Changes from view `a` to view `b`."""
    return {t.name: changes(t, a, b)[0] for t in engine.tables.values()}


def common_view(catalog, a: int, b: int) -> View:
    """The newest state branches a and b both descend from: their lines' shared
    segments, the last cut at the earlier of the two forks from it."""
    sa, sb = catalog.view(a, HEAD).segments, catalog.view(b, HEAD).segments
    shared = []
    for (ba, ca), (bb, cb) in zip(sa, sb):
        if ba != bb:
            break
        shared.append((ba, min(ca, cb)))
        if ca != cb:
            break
    return View(tuple(shared))


def merge_base(catalog, target: int, source: int) -> View:
    """The state both branches hold that the next merge of `source` into
    `target` diffs each side from (the module's docstring)."""
    done = catalog.by_id[target].merged.get(source)     # (source's version, merge's)
    back = catalog.by_id[source].merged.get(target)     # (target's version, merge's)
    # The newer merge's giver, which holds the older one's: a merge takes the
    # giver's newest published version, so two branches' merges do not cross
    # (should one race a commit not yet published, the base is still a state
    # both hold, only an older one).
    if back is not None and (done is None or back[1] > done[1]):
        return catalog.view(target, back[0])
    if done is not None:
        return catalog.view(source, done[0])
    return common_view(catalog, target, source)


def merge(engine, tx, source: int, source_version: int) -> None:
    """Write `source`'s changes (as of `source_version`) onto the transaction's
    branch; MergeConflictError (having written nothing) when both changed an id."""
    catalog, target = engine.catalog, tx.branch
    base = merge_base(catalog, target, source)
    head_s, head_t = catalog.view(source, source_version), catalog.view(target, HEAD)
    plans, conflicts = [], {}
    for t in list(engine.tables.values()):
        theirs, their_rows = changes(t, base, head_s)
        if not theirs:
            continue
        ours, _ = changes(t, base, head_t)
        touched = set(ours.added) | set(ours.changed) | set(ours.deleted)
        both = [k for k in theirs.added + theirs.changed + theirs.deleted if k in touched]
        # changed on both sides: a conflict unless both now hold the same document
        clash = []
        for k, r in zip(both, t.live_rows(both).tolist()):
            other = their_rows.get(k)
            if r < 0 or other is None:
                if (r < 0) != (other is None):
                    clash.append(k)
            elif not same_content(t, np.array([r]), np.array([other]))[0]:
                clash.append(k)
        if clash:
            conflicts[t.name] = sorted(clash)
        plans.append((t, theirs, their_rows, set(both) - set(clash)))
    if conflicts:
        listed = "; ".join(f"{name}: {ids[:10]}{' ...' if len(ids) > 10 else ''}"
                           for name, ids in conflicts.items())
        raise MergeConflictError(f"ids changed on both sides since the merge base: {listed}",
                                 conflicts)
    for t, theirs, their_rows, settled in plans:
        gone = [k for k in theirs.deleted if k not in settled]
        new = [k for k in theirs.added + theirs.changed if k not in settled]
        old = t.live_rows(gone + new)
        engine.delete(tx, t, np.unique(old[old >= 0]))
        if new:
            src = np.array([their_rows[k] for k in new], np.int64)
            engine.append_rows(tx, t, t.id_values(src),
                           {name: col.take(src) for name, col in t.columns.items()})

