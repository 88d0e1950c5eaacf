"""The full-text query language: parse, its errors, unparse, bind."""
import pytest
from hypothesis import given, settings, strategies as st

from varvedb.errors import QuerySyntaxError, VarveError
from varvedb.text import And, Analyzer, Not, Or, Phrase, Prefix, Term, bind, parse
from varvedb.text.query import unparse

A, B, C = Term("a"), Term("b"), Term("c")


@pytest.mark.parametrize("query, tree", [
    ("a", A),
    ("a b c", And((A, B, C))),
    ("a OR b", Or((A, B))),
    ("a b OR c", Or((And((A, B)), C))),            # side by side binds tighter
    ("a (b OR c)", And((A, Or((B, C))))),
    ("(a b) c", And((And((A, B)), C))),
    ("((a))", A),
    ('"new york" city', And((Phrase(("new", "york")), Term("city")))),
    ('  "  spaced   out " ', Phrase(("spaced", "out"))),
    ("data* -base", And((Prefix("data"), Not(Term("base"))))),
    ('a -"b c" -(c OR a)', And((A, Not(Phrase(("b", "c"))), Not(Or((C, A)))))),
    ("a or b", And((A, Term("or"), B))),             # only upper-case OR is OR
    ("state-of-the-art", Term("state-of-the-art")),  # '-' inside a word is the word's
    ("foo(bar)", And((Term("foo"), Term("bar")))),
    ("x**", Prefix("x")),
])
def test_parse(query, tree):
    assert parse(query) == tree


@pytest.mark.parametrize("query, position", [
    ("", 1), ("   ", 1),
    ('a "b c', 3),                 # unclosed quote: where it opens
    ("a (b c", 3), ("(", 1), ("a (", 3),
    ("a b)", 4), (")", 1),
    ("a OR", 3), ("OR a", 1), ("a OR OR b", 6), ("(a OR)", 4),
    ("-", 1), ("a -", 3), ("a - b", 3), ("--a", 1),
    ("-a", 1), ("-a -b", 1), ("a OR -b", 6), ("a (-b)", 4),
    ("()", 1), ('a ""', 3), ("a *", 3),
])
def test_malformed_queries_name_the_position(query, position):
    with pytest.raises(QuerySyntaxError) as err:
        parse(query)
    assert err.value.position == position
    assert isinstance(err.value, VarveError) and err.value.sqlstate == "42601"
    assert f"position {position}" in str(err.value)


WORD = st.text(alphabet="abcxyzéü09", min_size=1, max_size=5)
LEAF = st.one_of(WORD.map(Term), WORD.map(Prefix),
                 st.lists(WORD, min_size=1, max_size=3).map(lambda w: Phrase(tuple(w))))


def _tree(children):
    positive = st.one_of(LEAF, st.lists(children, min_size=2, max_size=3).map(
        lambda c: Or(tuple(c))), _and(children))
    return positive


def _and(children):
    # an And holds at least one positive child; a Not's child is positive
    items = st.one_of(children, children.map(Not))
    return st.tuples(children, st.lists(items, min_size=1, max_size=3)).map(
        lambda t: And((t[0],) + tuple(t[1])))


TREES = st.recursive(LEAF, _tree, max_leaves=10)


@settings(max_examples=300, deadline=None)
@given(TREES)
def test_unparse_then_parse_is_the_same_tree(tree):
    assert parse(unparse(tree)) == tree


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet='ab -*()"OR \t', max_size=20) | st.text(max_size=20))
def test_any_text_parses_or_raises_a_syntax_error_inside_it(text):
    try:
        tree = parse(text)
    except QuerySyntaxError as err:
        assert 1 <= err.position <= max(1, len(text))
    else:
        assert parse(unparse(tree)) == tree


ENGLISH = Analyzer("english")


def test_bind_analyzes_words_like_the_field():
    assert bind(parse("Running Dogs"), ENGLISH) == And((Term("run"), Term("dog")))
    assert bind(parse('"Café au lait"'), ENGLISH) == Phrase(("cafe", "au", "lait"))
    # a word of several tokens is a phrase of them; a phrase of one token a term
    assert bind(parse("state-of-the-art"), ENGLISH) == Phrase(("state", "of", "the", "art"))
    assert bind(parse('"Dogs"'), ENGLISH) == Term("dog")
    assert bind(parse("東京都"), Analyzer()) == Phrase(("東京", "京都"))


def test_bind_folds_prefixes_without_stemming():
    assert bind(parse("Runn*"), ENGLISH) == Prefix("runn")
    assert bind(parse("Ünivers*"), ENGLISH) == Prefix("univers")
    assert bind(parse("running-sho*"), ENGLISH) == And((Term("run"), Prefix("sho")))


def test_bind_drops_what_has_no_tokens():
    assert bind(parse("a ... b"), Analyzer()) == And((A, B))
    assert bind(parse("a -..."), Analyzer()) == A
    assert bind(parse("... OR b"), Analyzer()) == B
    assert bind(parse("!!! ..."), Analyzer()) is None
    assert bind(parse("... -b"), Analyzer()) is None          # nothing positive left
    assert bind(parse("a (... -b)"), Analyzer()) == A
    assert bind(parse("a -(b OR ...)"), Analyzer()) == And((A, Not(B)))
