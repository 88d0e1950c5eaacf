"""`varvedb bench sql`: what `db.sql()` costs, measured in one process.

Both figures use one collection `items` (id, tag = id % 10, embedding l2),
the clustered vectors of varvedb.demo_data with held-out queries, an HNSW index
(m, ef_construction; ef_search = ef), waited on until every row is linked,
and the filtered top-10 query `tag < 9`: it allows 90% of the rows, so the
plan is a graph walk with the filter mask (the report shows the plan).

* overhead: `db.sql("SELECT id, embedding <-> $1 AS distance FROM items WHERE
  tag < $2 ORDER BY embedding <-> $1 LIMIT 10", [q, 9])` (the statement
  compiled once, then cached by its text) against `collection.search(vector=q,
  where="tag < $1", params=[9], limit=10, select=[])` (ids and scores). Each
  query runs on both sides back to back, the side that runs first alternating
  query by query and round by round; the figure is the median over every
  (query, round) of the paired difference, with its p25–p75, and each side's
  median (also split by which side ran first: the second call of a query finds
  its graph nodes in cache). Whole rounds (layers._ab: all queries on one side,
  then on the other) give a second view. Goal: at most GOAL_US. A missed goal
  brings a cProfile of the SQL path minus the API path (functions only the
  SQL path calls, and the matching steps of both paths).
* pgvector: the same query through `db.sql()` against PostgreSQL + pgvector
  (varvedb_bench/pg_engine.py's server on its unix socket, binary COPY, HNSW with the
  same m / ef_construction, `SET hnsw.ef_search` = ef, `SET
  hnsw.iterative_scan = relaxed_order`), psycopg 3 with pgvector's types and
  `prepare=True`, both returning 10 ids. Interleaved query by query in the
  same way; a round's figure is each side's QPS over the round's queries; the
  ratio is the median of the per-round ratios (whole rounds as a second view).
  Recall@10 of each against
  numpy's exact answer under the filter, so the ratio is read at known recall.
"""
from __future__ import annotations

import cProfile
import gc
import json
import os
import pstats
import re
import shutil
import tempfile
import time

import numpy as np

from varvedb import demo_data
from . import data
from .layers import _ab, _pair, _stats, _us_per_call

GOAL_US = 10.0
K = 10
MAX_TAG = 9
SQL_OVERHEAD = ("SELECT id, embedding <-> $1 AS distance FROM items WHERE tag < $2 "
                "ORDER BY embedding <-> $1 LIMIT 10")
SQL_IDS = "SELECT id FROM items WHERE tag < $1 ORDER BY embedding <-> $2 LIMIT 10"
PG_IDS = "SELECT id FROM items WHERE tag < %s ORDER BY embedding <-> %s::vector LIMIT 10"
# where the SQL layer's own code lives (for the profile's SQL-only functions)
SQL_MODULES = (os.sep + os.path.join("varvedb", "sql") + os.sep,
               os.path.join("varvedb", "query", "expr.py"),
               os.path.join("varvedb", "query", "execute.py"))


# matching steps of the two paths (inclusive time), to say where the SQL path's time goes
PHASES = (("whole call", (os.path.join("varvedb", "database.py"), "sql"),
           (os.path.join("varvedb", "collection.py"), "search")),
          ("plan (bind, masks, strategy)", (os.path.join("sql", "select.py"), "plan"),
           (os.path.join("query", "bind.py"), "bind")),
          ("execute (walk, output columns)", (os.path.join("query", "execute.py"), "execute"),
           (os.path.join("query", "execute.py"), "execute")),
          ("result objects", (os.path.join("sql", "select.py"), "result_of"),
           (os.path.join("varvedb", "collection.py"), "_hits")))


class Setup:
    """The collection, its data and the queries, shared by both figures."""

    def __init__(self, workdir: str, rows: int, dim: int, queries: int, m: int,
                 ef_construction: int, ef: int, echo=print):
        import varvedb as vv
        self.rows, self.dim, self.m, self.ef_construction, self.ef = \
            rows, dim, m, ef_construction, ef
        ds = demo_data.make(rows, dim, queries)
        self.vectors, self.queries = ds.vectors, ds.queries
        self.ids = ds.ids
        self.tags = self.ids % 10
        self.path = os.path.join(workdir, f"sql-{rows}x{dim}.varve")
        if os.path.exists(self.path):     # a work folder reused from an earlier run
            os.remove(self.path)
        self.db = vv.connect(self.path, durability="off")
        self.items = self.db.create_collection(
            "items", {"tag": "int", "embedding": vv.Vector(dim, metric="l2")})
        self.items.insert_arrays(id=self.ids, tag=self.tags, embedding=self.vectors)
        t0 = time.perf_counter()
        self.items.create_index("embedding", vv.HNSW(m=m, ef_construction=ef_construction,
                                                     ef_search=ef))
        while self.items.index_status()["unlinked"]:
            time.sleep(0.01)
        self.build_s = time.perf_counter() - t0
        echo(f"bench sql: {rows:,} × {dim} loaded, HNSW linked in {self.build_s:.1f} s")
        self._truth = None

    def truth(self) -> np.ndarray:
        """Exact top-10 ids under the filter, per query (numpy, blocked GEMM)."""
        if self._truth is None:
            self._truth = data.exact_topk(self.vectors, self.queries, K, "l2",
                                          allow=self.tags < MAX_TAG)
        return self._truth

    def api(self, q):
        return self.items.search(vector=q, where="tag < $1", params=[MAX_TAG], limit=K,
                                 select=[])

    def sql(self, q):
        return self.db.sql(SQL_OVERHEAD, [q, MAX_TAG])

    def sql_ids(self, q):
        return self.db.sql(SQL_IDS, [MAX_TAG, q]).rows

    def close(self):
        self.db.close()


def _interleaved(a, b, queries, rounds: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-call nanoseconds of a(q) and b(q), shape (rounds, queries): each query
    runs on both sides back to back, the first side alternating query by query,
    and each round starts with the other side than the round before."""
    ta = np.empty((rounds, len(queries)), np.int64)
    tb = np.empty_like(ta)
    clock = time.perf_counter_ns
    for r in range(rounds):
        gc.collect()
        for i, q in enumerate(queries):
            if (i + r) % 2 == 0:
                t0 = clock()
                a(q)
                t1 = clock()
                b(q)
                t2 = clock()
                ta[r, i], tb[r, i] = t1 - t0, t2 - t1
            else:
                t0 = clock()
                b(q)
                t1 = clock()
                a(q)
                t2 = clock()
                tb[r, i], ta[r, i] = t1 - t0, t2 - t1
    return ta, tb


def steps(s: Setup, queries, rounds: int = 3) -> dict | str:
    """µs of the matching steps of both paths, timed with perf_counter_ns (no
    profiler), interleaved query by query with the first side alternating; each
    step's figure is balanced like the overhead's (the mean of its median when
    its side ran first and when it ran second).
    It calls the paths' internals (sql.compile_text, Context, Select.plan,
    result_of; query.bind.bind, Collection._hits): if those change it says so
    instead of failing the figure."""
    try:
        from varvedb.query.bind import bind
        from varvedb.query.execute import execute
        from varvedb.query.plan import Output
        from varvedb.query.request import Search
        from varvedb.sql import Context, compile_text
        from varvedb.sql.select import result_of
        session = s.db.thread_session()
        items = s.items
        clock = time.perf_counter_ns

        def sql_steps(q):
            t0 = clock()
            session.engine.ensure_open()
            (c,) = compile_text(SQL_OVERHEAD)
            ctx = Context(session, None)
            t1 = clock()
            query = c.impl.plan(ctx, [q, MAX_TAG])
            t2 = clock()
            res = execute(query)
            t3 = clock()
            result_of(res, query.plan.find(Output).columns)
            return t1 - t0, t2 - t1, t3 - t2, clock() - t3

        def api_steps(q):
            t0 = clock()
            request = Search.of(q, "tag < $1", (MAX_TAG,), K, [])
            query = bind(request, items.table, session.snapshot())
            t1 = clock()
            res = execute(query)
            t2 = clock()
            items._hits(query.table, res.rows, res.scores, res.fields, res.plan)
            return 0, t1 - t0, t2 - t1, clock() - t2
        sql_steps(queries[0])
        api_steps(queries[0])
    except (ImportError, AttributeError, TypeError, ValueError) as e:
        return f"steps not timed: the paths' internals changed ({e!r})"
    # got[side][ran first?]: each side's step times when it ran first, and second
    got = {"sql": ([], []), "api": ([], [])}
    for r in range(rounds):
        for i, q in enumerate(queries):
            order = (("sql", sql_steps), ("api", api_steps))
            for j, (side, fn) in enumerate(order if (i + r) % 2 == 0 else order[::-1]):
                got[side][j].append(fn(q))
    names = ("entry (compile_text cache hit, Context)", "plan (bind, filter mask, strategy)",
             "execute (walk; output columns)", "result objects (rows / Hit objects)")
    # balanced as the figure is: the mean of the medians run first and run second
    med = {side: sum(np.median(np.array(v, np.float64), axis=0) for v in pair) / 2e3
           for side, pair in got.items()}
    return {name: {"sql": round(float(med["sql"][j]), 2), "api": round(float(med["api"][j]), 2),
                   "added": round(float(med["sql"][j] - med["api"][j]), 2)}
            for j, name in enumerate(names)}


def _quartiles(x: np.ndarray) -> dict:
    return {"median": float(np.median(x)), "p25": float(np.percentile(x, 25)),
            "p75": float(np.percentile(x, 75))}


def _plan_of(plan) -> dict:
    """The VectorTopK under a plan: its strategy, ef and allowed rows, and the tree."""
    node = plan
    while node is not None and getattr(node, "NODE", "") != "VectorTopK":
        node = getattr(node, "input", None)
    if node is None:
        return {"tree": str(plan), "strategy": None}
    return {"tree": str(plan), "strategy": str(node.strategy), "ef": node.ef,
            "allowed": node.allowed}


def overhead(s: Setup, rounds: int, profile_queries: int = 300) -> dict:
    queries = list(s.queries)
    # untimed first pass: compiles and caches the statement, warms both paths,
    # and checks that both sides answer the same
    same = 0
    for q in queries:
        h, r = s.api(q), s.sql(q)
        same += [x.id for x in h] == [row[0] for row in r.rows]
    api_plan, sql_plan = _plan_of(h.plan), _plan_of(r.plan)
    ta, tb = _interleaved(s.api, s.sql, queries, rounds)
    diff = (tb - ta) / 1e3                       # µs the SQL side adds, per (round, query)
    api_first = (np.add.outer(np.arange(rounds), np.arange(len(queries))) % 2) == 0
    # whole rounds too (all queries on one side, then on the other, the first side
    # alternating): each side warm in its own loop, as a caller's loop would be
    ra, rb = _ab(lambda: _us_per_call(s.api, queries), lambda: _us_per_call(s.sql, queries),
                 rounds)
    whole = _pair("whole rounds", "µs per query", ra, rb, "sql", False)
    whole["added"] = _stats([y - x for x, y in zip(ra, rb)])
    del whole["ratio_means"]
    whole["ratio"]["means"] = "db.sql()'s time over collection.search's, per round"
    out = {
        "figure": f"time db.sql() adds over collection.search, filtered top-{K} "
                  f"(tag < {MAX_TAG}), {s.rows:,} × {s.dim}, statement cached",
        "unit": "µs per query",
        "added": {"median": float(np.median(diff)), "p25": float(np.percentile(diff, 25)),
                  "p75": float(np.percentile(diff, 75)),
                  "per_round_median": _stats([float(np.median(d)) for d in diff])},
        "api": {"median": float(np.median(ta) / 1e3),
                "per_round_median": _stats([float(np.median(t) / 1e3) for t in ta])},
        "sql": {"median": float(np.median(tb) / 1e3),
                "per_round_median": _stats([float(np.median(t) / 1e3) for t in tb])},
        "added_by_order": {
            "api_first": _quartiles(diff[api_first]), "sql_first": _quartiles(diff[~api_first]),
            "balanced": (float(np.median(diff[api_first])) +
                         float(np.median(diff[~api_first]))) / 2,
            "balanced_per_round": _stats([(float(np.median(d[f])) + float(np.median(d[~f]))) / 2
                                          for d, f in zip(diff, api_first)]),
            "means": "the second call of a query finds its graph nodes in cache, so the "
                     "paired difference is bimodal by which side ran first; the balanced "
                     "figure (the mean of the two medians) cancels that, and is the one "
                     "the goal is read on"},
        "whole_rounds": {"api": whole["varvedb"], "sql": whole["sql"],
                         "added": whole["added"], "ratio": whole["ratio"]},
        "goal_us": GOAL_US,
        "queries": len(queries), "rounds": rounds,
        "same_ids": f"{same} of {len(queries)} queries",
        "same_ids_all": same == len(queries),
        "plan": {"sql": sql_plan, "api": api_plan},
        "sql_text": SQL_OVERHEAD,
        "api_call": f'items.search(vector=q, where="tag < $1", params=[{MAX_TAG}], '
                    f'limit={K}, select=[])',
    }
    out["goal"] = "met" if out["added_by_order"]["balanced"] <= GOAL_US else "missed"
    out["steps_us"] = steps(s, queries)
    if out["goal"] == "missed" and profile_queries:
        out["profile"] = profile_sql_minus_api(s, queries[:profile_queries])
    return out


def _profile_pair(a, b, queries) -> tuple[dict, dict]:
    """cProfile stats of a(q) and of b(q), one profiler each, interleaved query by
    query with the first side alternating (as the timed figure runs them)."""
    pa, pb = cProfile.Profile(), cProfile.Profile()
    # gc off: a collection's pause lands on whatever function allocates at the
    # time and would be charged to it
    gc.collect()
    gc.disable()
    try:
        for i, q in enumerate(queries):
            for prof, fn in ((pa, a), (pb, b)) if i % 2 == 0 else ((pb, b), (pa, a)):
                prof.enable()
                fn(q)
                prof.disable()
    finally:
        gc.enable()
    return pstats.Stats(pa).stats, pstats.Stats(pb).stats


def _where(key) -> str:
    path, line, name = key
    if "varvedb" in path:
        path = path[path.rindex("varvedb"):]
    else:
        path = os.path.basename(path)
    return f"{path}:{line} {name}"


def profile_sql_minus_api(s: Setup, queries, top: int = 15) -> dict:
    """cProfile of both paths over the same queries, interleaved: the functions the SQL path
    calls and the API path does not, by their own time and by their inclusive
    time, per query (cProfile's own cost inflates every figure: read the
    shares, not the microseconds; gc is off while profiling)."""
    sql, api = _profile_pair(s.sql, s.api, queries)
    n = len(queries)

    def row(key, st):
        cc, nc, tt, ct, _ = st
        return {"function": _where(key), "calls_per_query": round(nc / n, 2),
                "own_us": round(tt / n * 1e6, 2), "inclusive_us": round(ct / n * 1e6, 2)}
    only = {k: v for k, v in sql.items() if k not in api}
    both = {k: v for k, v in sql.items() if k in api}
    total = lambda st: sum(v[2] for v in st.values()) / n * 1e6   # noqa: E731
    more = sorted(((v[2] - api[k][2]) / n * 1e6, k) for k, v in both.items())[::-1]

    def incl(st, path, name):
        ct = [v[3] for k, v in st.items() if k[0].endswith(path) and k[2] == name]
        return round(ct[0] / n * 1e6, 1) if ct else None
    phases = {phase: {"sql": incl(sql, *a), "api": incl(api, *b),
                      "sql_function": f"{a[0]} {a[1]}", "api_function": f"{b[0]} {b[1]}"}
              for phase, a, b in PHASES}
    return {
        "queries": n,
        "phases_inclusive_us": phases,
        "sql_total_us": round(total(sql), 1), "api_total_us": round(total(api), 1),
        "sql_only_own_us": round(total(only), 1),
        "sql_layer_own_us": round(sum(v[2] for k, v in only.items()
                                      if any(m in k[0] for m in SQL_MODULES)) / n * 1e6, 1),
        "sql_only_by_own_time": [row(k, v) for k, v in
                                 sorted(only.items(), key=lambda kv: -kv[1][2])[:top]],
        "sql_only_by_inclusive_time": [row(k, v) for k, v in
                                       sorted(only.items(), key=lambda kv: -kv[1][3])[:top]],
        "shared_but_more_in_sql": [{"function": _where(k), "extra_own_us": round(d, 2)}
                                   for d, k in more[:5] if d > 0],
    }


def versus_pgvector(s: Setup, workdir: str, rounds: int, echo=print) -> dict | str:
    from .engines import Missing
    from .pg_engine import Pgvector
    try:
        pg = Pgvector(os.path.join(workdir, "pg"), s.dim, "l2")
    except Missing as e:
        return f"pgvector figure skipped: {e}"
    try:
        npy = os.path.join(workdir, f"vectors-{s.rows}x{s.dim}.npy")
        np.save(npy, s.vectors)
        pg.load(s.ids, s.tags, data.VectorFile(npy))
        os.remove(npy)
        t0 = time.perf_counter()
        pg.build_index(s.m, s.ef_construction)
        pg_build_s = time.perf_counter() - t0
        con = pg.con
        con.execute(f"SET hnsw.ef_search = {s.ef}")
        con.execute("SET hnsw.iterative_scan = relaxed_order")

        def pg_ids(q):
            return con.execute(PG_IDS, (MAX_TAG, q), prepare=True, binary=True).fetchall()
        queries = list(s.queries)
        # untimed first pass: prepares both statements and gives each side's answers
        vv_found = [np.array([r[0] for r in s.sql_ids(q)], np.int64) for q in queries]
        pg_found = [np.array([r[0] for r in pg_ids(q)], np.int64) for q in queries]
        plan = {"custom": _explain(con, PG_IDS, (MAX_TAG, queries[0])),
                "generic": _explain(con, PG_IDS.replace("%s", "$1", 1).replace("%s", "$2"),
                                    None, "(GENERIC_PLAN) "),
                "prepared": _prepared_plan(con, queries[0])}
        ta, tb = _interleaved(s.sql_ids, pg_ids, queries, rounds)
        wa, wb = _ab(lambda: 1e6 / _us_per_call(s.sql_ids, queries),
                     lambda: 1e6 / _us_per_call(pg_ids, queries), rounds)
        truth = s.truth()
        qps_vv = [len(queries) / (t.sum() / 1e9) for t in ta]
        qps_pg = [len(queries) / (t.sum() / 1e9) for t in tb]
        out = _pair(f"filtered top-{K} (tag < {MAX_TAG}) through db.sql() against "
                    f"pgvector, {s.rows:,} × {s.dim}, one query at a time", "queries/s",
                    qps_vv, qps_pg, "pgvector", True)
        out.update({
            "recall@10": {"varvedb": data.recall(vv_found, truth),
                          "pgvector": data.recall(pg_found, truth)},
            "median_us": {"varvedb": float(np.median(ta) / 1e3),
                          "pgvector": float(np.median(tb) / 1e3)},
            "whole_rounds": _pair("whole rounds", "queries/s", wa, wb, "pgvector", True),
            "both_return_k": bool(all(len(f) == K for f in vv_found + pg_found)),
            "queries": len(queries),
            "plan": {"varvedb": _plan_of(s.db.sql(SQL_IDS, [MAX_TAG, queries[0]]).plan),
                     "pgvector": plan},
            "sql_text": {"varvedb": SQL_IDS, "pgvector": PG_IDS},
            "note": (f"{pg.notes.get('version', '')}; psycopg {_version('psycopg')} over the "
                     f"unix socket, execute(prepare=True, binary=True), pgvector's "
                     f"register_vector; SET hnsw.ef_search = {s.ef}, hnsw.iterative_scan = "
                     f"relaxed_order; {pg.notes.get('load', '')}; {pg.notes.get('index', '')}"
                     f"; HNSW build {pg_build_s:.1f} s (varvedb {s.build_s:.1f} s)"),
        })
        return out
    finally:
        pg.teardown()


def _explain(con, sql: str, params, options: str = "") -> str:
    """PostgreSQL's plan on one line, without costs or the query vector's digits."""
    if params is None:    # $n placeholders: the simple-query protocol binds none
        res = con.pgconn.exec_(f"EXPLAIN {options}{sql}".encode())
        lines = [res.get_value(i, 0).decode() for i in range(res.ntuples)]
    else:
        lines = [r[0] for r in con.execute(f"EXPLAIN {options}{sql}", params,
                                           binary=True).fetchall()]
    text = " / ".join(line.strip() for line in lines)
    return re.sub(r"'\[[^']*\]'::\w+", "$q", re.sub(r"\s*\(cost=[^)]*\)", "", text))


def _prepared_plan(con, q) -> str:
    """The plan a prepared statement runs once its plan cache has settled (after
    five custom plans PostgreSQL may switch to the generic one): a server-side
    PREPARE of the same query, executed ten times, then EXPLAIN EXECUTE."""
    con.execute(f"PREPARE bench_sql_q (int, vector) AS "
                f"{PG_IDS.replace('%s::vector', '$2').replace('%s', '$1')}")
    # EXECUTE is a utility statement: its arguments are literals, not bind parameters
    run = f"EXECUTE bench_sql_q ({MAX_TAG}, '[{','.join(repr(float(x)) for x in q)}]')"
    try:
        for _ in range(10):
            con.execute(run).fetchall()
        return _explain(con, run, None)
    finally:
        con.execute("DEALLOCATE bench_sql_q")


def _version(module: str) -> str:
    try:
        from importlib.metadata import version
        return version(module)
    except Exception:
        return "?"


def run(rows: int = 100_000, dim: int = 128, queries: int = 1000, rounds: int = 9,
        m: int = 16, ef_construction: int = 200, ef: int = 100, workdir: str | None = None,
        only: list[str] | None = None, profile_queries: int = 300, echo=print) -> dict:
    """Both figures (or those named in `only`: overhead, pgvector) as a dict."""
    own = workdir is None
    workdir = workdir or tempfile.mkdtemp(prefix="varvedb-sql-", dir=os.getcwd())
    os.makedirs(workdir, exist_ok=True)
    out = {"config": {"rows": rows, "dim": dim, "queries": queries, "rounds": rounds,
                      "m": m, "ef_construction": ef_construction, "ef": ef,
                      "filter": f"tag < {MAX_TAG}, tag = id % 10",
                      "data": "varvedb.demo_data clustered, held-out queries"}}
    s = None
    try:
        s = Setup(workdir, rows, dim, queries, m, ef_construction, ef, echo)
        out["config"]["varvedb_build_s"] = round(s.build_s, 2)
        steps = {"overhead": lambda: overhead(s, rounds, profile_queries),
                 "pgvector": lambda: versus_pgvector(s, workdir, rounds, echo)}
        for name, step in steps.items():
            if only and name not in only:
                continue
            echo(f"bench sql: {name} ({rounds} rounds × {queries} queries)")
            out[name] = step()
            echo(json.dumps(out[name], indent=1, ensure_ascii=False))
    finally:
        if s is not None:
            s.close()
        if own:
            shutil.rmtree(workdir, ignore_errors=True)
    return out


def markdown(report: dict) -> str:
    """The figures as a short markdown note."""
    c = report["config"]
    lines = [f"# bench sql: {c['rows']:,} × {c['dim']}, filter {c['filter']}", "",
             f"HNSW m={c['m']} ef_construction={c['ef_construction']}, ef_search={c['ef']}; "
             f"{c['queries']} queries × {c['rounds']} rounds, interleaved query by query "
             "(first side alternating per query and per round).", ""]
    o = report.get("overhead")
    if isinstance(o, dict):
        a, bo = o["added"], o["added_by_order"]
        pr = a["per_round_median"]
        lines += ["## db.sql() over collection.search", "",
                  "| | median µs | p25–p75 | per-round medians (min–max) |",
                  "|---|---|---|---|",
                  f"| added by db.sql() | {a['median']:.1f} | {a['p25']:.1f}–{a['p75']:.1f} | "
                  f"{pr['min']:.1f}–{pr['max']:.1f} |",
                  f"| collection.search | {o['api']['median']:.1f} | | "
                  f"{o['api']['per_round_median']['min']:.1f}–"
                  f"{o['api']['per_round_median']['max']:.1f} |",
                  f"| db.sql() | {o['sql']['median']:.1f} | | "
                  f"{o['sql']['per_round_median']['min']:.1f}–"
                  f"{o['sql']['per_round_median']['max']:.1f} |",
                  f"| added, pairs with the API first | {bo['api_first']['median']:.1f} | "
                  f"{bo['api_first']['p25']:.1f}–{bo['api_first']['p75']:.1f} | |",
                  f"| added, pairs with db.sql() first | {bo['sql_first']['median']:.1f} | "
                  f"{bo['sql_first']['p25']:.1f}–{bo['sql_first']['p75']:.1f} | |",
                  f"| **added, balanced** (mean of the two above) | **{bo['balanced']:.1f}** | "
                  f"| {bo['balanced_per_round']['min']:.1f}–"
                  f"{bo['balanced_per_round']['max']:.1f} |",
                  f"| added, whole rounds (mean µs a round) | "
                  f"{o['whole_rounds']['added']['median']:.1f} | | "
                  f"{o['whole_rounds']['added']['min']:.1f}–"
                  f"{o['whole_rounds']['added']['max']:.1f} |", "",
                  f"{bo['means'][0].upper()}{bo['means'][1:]}.", "",
                  f"Goal ≤ {o['goal_us']:g} µs: **{o['goal']}**. Same ids: {o['same_ids']}. "
                  f"Plan: {o['plan']['sql']['strategy']} (ef {o['plan']['sql'].get('ef')}).", ""]
        if isinstance(o.get("steps_us"), dict):
            lines += ["Where the time goes, step by step (perf_counter_ns, no profiler, "
                      "interleaved; balanced medians, as above):", "",
                      "| step | db.sql() µs | collection.search µs | added µs |",
                      "|---|---|---|---|"]
            lines += [f"| {name} | {v['sql']} | {v['api']} | {v['added']} |"
                      for name, v in o["steps_us"].items()]
            lines.append("")
        elif o.get("steps_us"):
            lines += [o["steps_us"], ""]
        if "profile" in o:
            p = o["profile"]
            lines += [f"cProfile over {p['queries']} queries (inflated by the profiler, gc off): SQL "
                      f"path {p['sql_total_us']} µs/query, API path {p['api_total_us']}; "
                      f"functions only the SQL path calls: {p['sql_only_own_us']} µs own "
                      f"time ({p['sql_layer_own_us']} µs in sql/, query/expr.py, "
                      "query/execute.py).", "",
                      "| SQL-only function | calls/query | own µs | inclusive µs |",
                      "|---|---|---|---|"]
            lines += [f"| `{r['function']}` | {r['calls_per_query']} | {r['own_us']} | "
                      f"{r['inclusive_us']} |" for r in p["sql_only_by_own_time"]]
            lines += ["", "| step (inclusive µs, profiled) | db.sql() | collection.search |",
                      "|---|---|---|"]
            lines += [f"| {name} (`{ph['sql_function']}` / `{ph['api_function']}`) | "
                      f"{ph['sql']} | {ph['api']} |"
                      for name, ph in p["phases_inclusive_us"].items()]
            lines.append("")
    elif o is not None:
        lines += [f"overhead: {o}", ""]
    g = report.get("pgvector")
    if isinstance(g, dict):
        r = g["ratio"]
        lines += ["## db.sql() against pgvector", "",
                  "| | varvedb | pgvector |", "|---|---|---|",
                  f"| QPS, median (min–max) over rounds | {g['varvedb']['median']:,.0f} "
                  f"({g['varvedb']['min']:,.0f}–{g['varvedb']['max']:,.0f}) | "
                  f"{g['pgvector']['median']:,.0f} ({g['pgvector']['min']:,.0f}–"
                  f"{g['pgvector']['max']:,.0f}) |",
                  f"| median µs per query | {g['median_us']['varvedb']:.0f} | "
                  f"{g['median_us']['pgvector']:.0f} |",
                  f"| QPS, whole rounds (one side, then the other) | "
                  f"{g['whole_rounds']['varvedb']['median']:,.0f} | "
                  f"{g['whole_rounds']['pgvector']['median']:,.0f} |",
                  f"| recall@10 (filtered, exact truth) | {g['recall@10']['varvedb']:.4f} | "
                  f"{g['recall@10']['pgvector']:.4f} |", "",
                  f"Ratio (median of per-round QPS ratios): **{r['median']:.2f}×** "
                  f"({r['min']:.2f}–{r['max']:.2f}); {g['ratio_means']}. Whole rounds: "
                  f"{g['whole_rounds']['ratio']['median']:.2f}× "
                  f"({g['whole_rounds']['ratio']['min']:.2f}–"
                  f"{g['whole_rounds']['ratio']['max']:.2f}).", "",
                  f"pgvector plan of the prepared statement (EXPLAIN EXECUTE after ten runs): "
                  f"`{g['plan']['pgvector']['prepared']}`; custom plan: "
                  f"`{g['plan']['pgvector']['custom']}`; generic plan: "
                  f"`{g['plan']['pgvector']['generic']}`. {g['note']}.", ""]
    elif g is not None:
        lines += [f"pgvector: {g}", ""]
    return "\n".join(lines)


def write(report: dict, out: str, render=None) -> str:
    """OUT (JSON) and OUT with .md (`render(report)`, default this bench's
    markdown): returns the markdown's path."""
    with open(out, "w") as f:
        json.dump(report, f, indent=1, ensure_ascii=False)
    md = os.path.splitext(out)[0] + ".md"
    with open(md, "w") as f:
        f.write((render or markdown)(report))
    return md
