"""`varvedb_history(...)`: the history of the file, of a table, or of one row, as rows.

    SELECT * FROM varvedb_history()            every commit: version, committed_at,
                                               chain, rows_changed
    SELECT * FROM varvedb_history('t')         the commits that changed rows of t
    SELECT * FROM varvedb_history('t', 7)      every version of row 7 of t:
                                               version, deleted, doc (json)
"""
from __future__ import annotations

import numpy as np

from ..errors import SqlError
from ..query.expr import Val, object_array



def history_rows(ctx, args: list) -> tuple[list[str], list[Val]]:
    if len(args) > 2:
        raise SqlError("42883", "varvedb_history() takes at most a table and an id")
    if len(args) == 2:
        return _row_history(ctx, args[0], args[1])
    snap = ctx.snapshot()
    view = snap.view        # the branch's line: its ancestors' commits up to each fork
    commits = [c for c in ctx.engine.history
               if c.version <= snap.version and view.holds(c.branch, c.version)]
    if args:
        t = ctx.table(_name(args[0]))
        n = snap.n(t)
        touched = np.union1d(t.born.data[:n], t.died.data[:n])
        keep = set(touched.tolist())
        commits = [c for c in commits if c.version in keep]
    m = len(commits)
    none = np.zeros(m, bool)
    return (["version", "committed_at", "chain", "rows_changed"],
            [Val("int", np.array([c.version for c in commits], np.int64), none),
             Val("timestamp", np.array([c.timestamp_us for c in commits], np.int64), none),
             Val("text", object_array([c.chain.hex() for c in commits]), none),
             Val("int", np.array([c.rows_changed for c in commits], np.int64), none)])


def _row_history(ctx, table, key):
    from ..collection import Collection
    coll = Collection(ctx.session.db, _name(table), ctx.session)
    ctx.table(_name(table))
    versions = coll.history(key)
    m = len(versions)
    docs = []
    for v in versions:
        doc = {}
        for k, x in v["doc"].items():
            if hasattr(x, "tolist"):
                x = x.tolist()
            elif hasattr(x, "isoformat"):
                x = x.isoformat()
            doc[k] = x
        docs.append(doc)
    deleted = [v["deleted"] for v in versions]
    return (["version", "deleted", "doc"],
            [Val("int", np.array([v["version"] for v in versions], np.int64), np.zeros(m, bool)),
             Val("int", np.array([d or 0 for d in deleted], np.int64),
                 np.array([d is None for d in deleted], bool)),
             Val("json", object_array(docs), np.zeros(m, bool))])


def _name(v) -> str:
    if not isinstance(v, str):
        raise SqlError("42804", "varvedb_history() takes a table name as text")
    return v


