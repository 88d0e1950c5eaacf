"""A text query's size: at most 1 024 distinct terms, prefixes and phrases once
analyzed (QueryTooLargeError, SQLSTATE 54000) in every place a text query goes,
repeated words allowed, and a long query compiled in time linear in its words
(a 200 000-word query took minutes: a set copied per word in the compiler)."""
from __future__ import annotations

import resource
import subprocess
import textwrap

import pytest

import varvedb as vv
from conftest import PYTHON, child_env, file_digest
from varvedb.errors import QuerySyntaxError, QueryTooLargeError

WORDS = [f"w{i}" for i in range(1100)]


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("limits") / "t.varve")
    db = vv.connect(path)
    c = db.create_collection("docs", {"body": vv.Text(fts=True)})
    c.insert([{"id": 0, "body": " ".join(WORDS[:1000])},
              {"id": 1, "body": "w1 w2 other words"},
              {"id": 2, "body": "nothing of the kind"}])
    db.checkpoint()
    yield db, c, path
    db.close()


def _query(words, prefixes=(), phrases=()):
    return " ".join([*words, *(p + "*" for p in prefixes), *(f'"{p}"' for p in phrases)])


CASES = [   # (what, query, over the cap)
    ("1024 terms", _query(WORDS[:1024]), False),
    ("1025 terms", _query(WORDS[:1025]), True),
    ("counted once analyzed", _query(WORDS[:1024] + ["W0", "w0.", "(W1)"]), False),
    ("prefixes count", _query(WORDS[:1023], prefixes=["w1", "w2"]), True),
    ("phrases count", _query(WORDS[:1000], phrases=[f"w{i} w{i + 1}" for i in range(25)]),
     True),
    ("terms under a negation count", _query(WORDS[:1000]) + " -(" + _query(WORDS[1000:1025])
     + ")", True),
    ("200 000 distinct words", _query(f"x{i}" for i in range(200_000)), True),
    ("repeats are free", _query(WORDS[:1000] * 20), False),
]


@pytest.mark.parametrize("what,query,over", CASES, ids=[c[0] for c in CASES])
def test_the_term_cap_everywhere_a_text_query_goes(docs, what, query, over):
    db, c, path = docs
    calls = [lambda: c.search(text=query, limit=3),
             lambda: c.find(where="body @@ $1", params=[query]),
             lambda: db.sql("SELECT count(*) FROM docs WHERE body @@ $1", [query]),
             lambda: db.sql("SELECT bm25(body, $1) FROM docs", [query])]
    before = file_digest(path)
    for call in calls:
        if over:
            with pytest.raises(QueryTooLargeError) as e:
                call()
            assert isinstance(e.value, QuerySyntaxError)
            assert e.value.sqlstate == "54000" and "1,024" in str(e.value)
        else:
            call()
    assert file_digest(path) == before


def test_repeated_words_each_count_in_the_score(docs):
    _, c, _ = docs
    once = c.search(text=_query(WORDS[:1000]), limit=3)
    many = c.search(text=_query(WORDS[:1000] * 20), limit=3)
    assert [h.id for h in once] == [h.id for h in many] == [0]
    assert many[0].score == pytest.approx(20 * once[0].score, rel=1e-5)


CHILD = textwrap.dedent("""
    import random, sys
    import varvedb as vv
    db = vv.connect(sys.argv[1], readonly=True)
    c = db["docs"]
    rng = random.Random(5)
    words = [f"w{i}" for i in range(1000)]
    once = c.search(text=" ".join(words), limit=3)
    long = " ".join(words * 200)          # 200 000 words, 1 000 distinct
    many = c.search(text=long, limit=3)
    assert [h.id for h in many] == [0], many
    assert abs(many[0].score - 200 * once[0].score) <= 1e-4 * many[0].score
    try:
        c.search(text=" ".join(f"x{i}" for i in range(200_000)))
    except vv.QueryTooLargeError:
        print("ok")
""")


def test_a_200_000_word_query_is_answered_within_a_cpu_budget(docs):
    """In a child whose CPU time is capped (RLIMIT_CPU, not the wall clock: a busy
    machine does not change it) at 10 times what the linear compiler needs: the
    quadratic one spent minutes of CPU on this query and was killed."""
    _, _, path = docs

    def limit():
        resource.setrlimit(resource.RLIMIT_CPU, (120, 120))

    out = subprocess.run([PYTHON, "-c", CHILD, path], env=child_env(), capture_output=True,
                         text=True, timeout=1200, preexec_fn=limit)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
