"""Joins, UNION and window ranks (sql/relations.py, query/relations.py,
query/window.py) against plain-Python oracles on random small tables: a
nested loop for every join kind (NULL keys, duplicate keys, an ON clause with
more than the key), a set of rows for UNION, counting for rank().

The statements' agreement with PostgreSQL is tests/sql_cases/relations.sql's.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import varvedb as vv
from varvedb.errors import SqlError
from varvedb.query.expr import Val
from varvedb.query.relations import (MAX_PAIRS, cross_pairs, equi_pairs, first_of_each,
                                     join_pairs, key_codes)

VALUE = st.one_of(st.none(), st.integers(-3, 3))
ROWS = st.lists(st.tuples(VALUE, VALUE), max_size=12)
KINDS = ("inner", "left", "right", "full")
SQL_KIND = {"inner": "JOIN", "left": "LEFT JOIN", "right": "RIGHT JOIN", "full": "FULL JOIN"}


@pytest.fixture(scope="module")
def db():
    d = vv.connect(":memory:")
    yield d
    d.close()


def _load(db, left, right):
    for name, rows in (("l", left), ("r", right)):
        db.sql(f"DROP TABLE IF EXISTS {name}")
        db.sql(f"CREATE TABLE {name} (id bigint PRIMARY KEY, k int, v int)")
        if rows:
            db.sql(f"INSERT INTO {name} VALUES " + ", ".join(
                f"({i}, {_lit(k)}, {_lit(v)})" for i, (k, v) in enumerate(rows)))


def _lit(x):
    return "NULL" if x is None else str(x)


def _sorted(rows):
    return sorted(rows, key=lambda r: tuple((x is None, x if x is not None else 0) for x in r))


def nested_loop(kind, left, right, residual):
    """The join by definition: every pair tested, NULL never equal."""
    out, right_matched = [], set()
    for i, (lk, lv) in enumerate(left):
        matched = False
        for j, (rk, rv) in enumerate(right):
            if lk is not None and rk is not None and lk == rk and residual(lv, rv):
                out.append((i, j))
                matched = True
                right_matched.add(j)
        if not matched and kind in ("left", "full"):
            out.append((i, None))
    if kind in ("right", "full"):
        out.extend((None, j) for j in range(len(right)) if j not in right_matched)
    return out


RESIDUALS = {
    None: lambda lv, rv: True,
    "l.v < r.v": lambda lv, rv: lv is not None and rv is not None and lv < rv,
    "l.v IS NULL OR r.v = 2": lambda lv, rv: lv is None or rv == 2,
}


@settings(max_examples=150, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(left=ROWS, right=ROWS, kind=st.sampled_from(KINDS),
       residual=st.sampled_from(sorted(RESIDUALS, key=str)))
def test_joins_equal_a_nested_loop(db, left, right, kind, residual):
    _load(db, left, right)
    on = "l.k = r.k" + (f" AND ({residual})" if residual else "")
    got = db.sql(f"SELECT l.id, r.id FROM l {SQL_KIND[kind]} r ON {on}").rows
    assert _sorted(got) == _sorted(nested_loop(kind, left, right, RESIDUALS[residual]))


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(left=ROWS, right=ROWS)
def test_cross_join_union_and_rank_equal_their_definitions(db, left, right):
    _load(db, left, right)
    cross = db.sql("SELECT l.id, r.id FROM l CROSS JOIN r").rows
    assert _sorted(cross) == _sorted([(i, j) for i in range(len(left))
                                      for j in range(len(right))])
    union = db.sql("SELECT k, v FROM l UNION SELECT k, v FROM r").rows
    assert _sorted(union) == _sorted(set(left) | set(right))
    union_all = db.sql("SELECT k, v FROM l UNION ALL SELECT k, v FROM r").rows
    assert _sorted(union_all) == _sorted(left + right)
    ranks = db.sql("SELECT id, rank() OVER (PARTITION BY k ORDER BY v DESC), "
                   "dense_rank() OVER (PARTITION BY k ORDER BY v DESC) FROM l").rows

    def before(a, b):       # DESC: NULLs first, then larger values
        return (a is None and b is not None) or (a is not None and b is not None and a > b)
    want = [(i, 1 + sum(1 for k2, v2 in left if k2 == k and before(v2, v)),
             1 + len({v2 for k2, v2 in left if k2 == k and before(v2, v)}))
            for i, (k, v) in enumerate(left)]
    assert _sorted(ranks) == _sorted(want)


def test_the_hash_join_pairs_duplicates_and_never_matches_null():
    left = [Val("int", np.array([1, 2, 2, 0, 3]), np.array([0, 0, 0, 1, 0], bool))]
    right = [Val("float", np.array([2.0, 2.0, 1.0, 0.0, 9.0]), np.array([0, 0, 0, 1, 0], bool))]
    lc, rc, width = key_codes(left, right)
    li, ri = equi_pairs(lc, rc, width)
    assert sorted(zip(li.tolist(), ri.tolist())) == [(0, 2), (1, 0), (1, 1), (2, 0), (2, 1)]
    li, ri = join_pairs("full", 5, 5, left, right, None)
    pairs = set(zip(li.tolist(), ri.tolist()))
    assert {(3, -1), (4, -1), (-1, 3), (-1, 4)} <= pairs and len(pairs) == 9


def test_a_join_past_the_pair_limit_is_refused_before_it_is_built():
    with pytest.raises(SqlError) as e:
        cross_pairs(MAX_PAIRS, 2)
    assert e.value.sqlstate == "54000"


def test_a_select_lists_series_past_the_row_limit_together_are_refused(db):
    """MAX_BUILT_ROWS bounds a select list's set-returning calls over all its input
    rows, not each call alone: 150 series of 9,000,000 rows are refused (54000)
    before one is built, not a MemoryError (red-team 8 F01)."""
    with pytest.raises(SqlError) as e:
        db.sql("SELECT count(*) FROM (SELECT generate_series(1, 9000000) AS x "
               "FROM generate_series(1, 150) g) s")
    assert e.value.sqlstate == "54000" and "1,350,000,000" in str(e.value)
    assert db.sql("SELECT count(*), sum(x) FROM (SELECT generate_series(1, 1000) AS x "
                  "FROM generate_series(1, 3) g) s").rows == [(3000, 3 * 500500)]


def test_distinct_rows_survive_a_radix_wider_than_int64():
    rng = np.random.default_rng(3)
    data = rng.integers(0, 300, size=(2000, 8))
    data[::2] = data[1::2]                              # every row twice
    nulls = np.zeros(2000, bool)
    nulls[:10] = True
    cols = [Val("int", data[:, i].copy(), nulls if i == 0 else np.zeros(2000, bool))
            for i in range(8)]
    cols.append(Val("text", np.array([str(x % 7) for x in data[:, 0]], dtype=object),
                    np.zeros(2000, bool)))
    firsts = np.sort(first_of_each(cols, 2000))
    rows = [tuple(None if c.nulls[i] else c.data[i] for c in cols) for i in range(2000)]
    assert [rows[i] for i in firsts] == list(dict.fromkeys(rows))


def test_where_equalities_of_a_from_list_are_hash_keys(db):
    """8,000 x 8,000 rows is past MAX_PAIRS as a cross product: WHERE's equality
    makes the pairs those of equal keys (and WHERE still tests it)."""
    assert 8000 * 8000 > MAX_PAIRS
    for name in ("p", "q"):
        db.sql(f"DROP TABLE IF EXISTS {name}")
        db.sql(f"CREATE TABLE {name} (id bigint PRIMARY KEY, k int)")
        db.sql(f"INSERT INTO {name} VALUES " + ", ".join(
            f"({i}, {'NULL' if i % 1000 == 7 else i % 4000})" for i in range(8000)))
    got = db.sql("SELECT count(*), sum(p.id) FROM p, q WHERE p.k = q.k AND q.id < 4000").rows
    want_pairs = [(i, j) for j in range(4000) if j % 1000 != 7
                  for i in (j, j + 4000) if i % 1000 != 7]
    assert got == [(len(want_pairs), sum(i for i, _ in want_pairs))]
    plan = "\n".join(r[0] for r in db.sql("EXPLAIN SELECT p.id FROM p, q WHERE p.k = q.k").rows)
    assert "Inner Join on p.k = q.k" in plan
    with pytest.raises(SqlError) as e:              # no equality: the cross product is refused
        db.sql("SELECT count(*) FROM p, q WHERE p.k < q.k")
    assert e.value.sqlstate == "54000"


def test_the_hybrid_search_idiom_in_varvedbs_dialect(tmp_path):
    """pgvector's hybrid search, its keyword half written with varvedb's bm25() over
    a full-text column: each half ranked with rank() OVER, the halves fused over a
    FULL OUTER JOIN, equal to the two top-k's fused here by hand."""
    db = vv.connect(str(tmp_path / "h.varve"))
    docs = db.create_collection("documents", {"content": vv.Text(fts=True),
                                              "embedding": vv.Vector(3)})
    rng = np.random.default_rng(5)
    words = ["dog", "cat", "bear", "bird", "fish", "barking", "purring", "growling"]
    docs.insert([{"id": i, "content": " ".join(rng.choice(words, 4)),
                  "embedding": rng.random(3).tolist()} for i in range(60)])
    q, text, k = [0.2, 0.9, 0.1], "bear growling", 60
    got = db.sql("""
        WITH semantic_search AS (
            SELECT id, RANK () OVER (ORDER BY embedding <=> $1) AS rank
            FROM documents ORDER BY embedding <=> $1 LIMIT 20
        ), keyword_search AS (
            SELECT id, RANK () OVER (ORDER BY bm25(content, $2) DESC) AS rank
            FROM documents WHERE content @@ $2 ORDER BY bm25(content, $2) DESC LIMIT 20
        )
        SELECT COALESCE(semantic_search.id, keyword_search.id) AS id,
               COALESCE(1.0 / ($3 + semantic_search.rank), 0.0) +
               COALESCE(1.0 / ($3 + keyword_search.rank), 0.0) AS score
        FROM semantic_search
        FULL OUTER JOIN keyword_search ON semantic_search.id = keyword_search.id
        ORDER BY score DESC, id LIMIT 5""", [q, text, k]).rows

    def ranked(sql, params):
        """rank() of each id: rows come best first; a tie keeps the rank before it."""
        ranks, last = {}, None
        for pos, (i, key) in enumerate(db.sql(sql, params).rows):
            ranks[i] = ranks[last[0]] if last is not None and last[1] == key else pos + 1
            last = (i, key)
        return ranks
    sem = ranked("SELECT id, embedding <=> $1 FROM documents ORDER BY embedding <=> $1 "
                 "LIMIT 20", [q])
    kw = ranked("SELECT id, bm25(content, $1) FROM documents WHERE content @@ $1 "
                "ORDER BY bm25(content, $1) DESC LIMIT 20", [text])
    assert kw and sem
    fused = {i: (1 / (k + sem[i]) if i in sem else 0) + (1 / (k + kw[i]) if i in kw else 0)
             for i in set(sem) | set(kw)}
    want = sorted(fused.items(), key=lambda t: (-t[1], t[0]))[:5]
    assert [i for i, _ in got] == [i for i, _ in want]
    assert [s for _, s in got] == pytest.approx([s for _, s in want])
    db.close()
