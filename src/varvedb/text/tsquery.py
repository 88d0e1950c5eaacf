"""PostgreSQL's query constructors, read into varvedb's full-text query syntax.

SQL's `to_tsquery('a | b')`, `websearch_to_tsquery('a or b')` and
`plainto_tsquery('a b')` give the text of an equivalent varvedb query
(text/query.py), so `body @@ to_tsquery('a | b')` and `bm25(body,
websearch_to_tsquery('a or b'))` read as `body @@ 'a OR b'`: the OR forms are
how SQL asks for any of a question's words (the API's `match="any"`). The
words are analyzed by the column's own analyzer, not by a PostgreSQL text
search configuration: the optional first argument is accepted only as
'simple' (no stopwords, no stemming), the one configuration that reads words
as varvedb does.

What maps: to_tsquery's operands (a word, `word:*` a prefix), `&`, `|`, `!`,
`<->` between words (a phrase) and parentheses; websearch_to_tsquery's words,
`"phrases"`, `or` and `-word` (anything else is a separator, and it never
fails, as PostgreSQL's); plainto_tsquery's words, all required. What does not
(weights `:A`, `<N>` distances, `<->` around a group, a query of negations
only) is refused with SqlError 0A000.
"""
from __future__ import annotations

import re

from ..errors import SqlError
from .query import And, Not, Or, Phrase, Prefix, Term, unparse

CONFIGS = ("simple",)

# to_tsquery's tokens: operators, parentheses, quoted or bare operands
_TS_TOKEN = re.compile(r"\s*(?:(<->)|(<\d+>)|([&|!()])|'((?:[^']|'')*)'(:\*)?|"
                       r"([^\s&|!()<>':]+)(:\*|:[A-Za-z*]+)?)")
# a word of websearch_to_tsquery / plainto_tsquery: what is not a separator
_WORD = re.compile(r"[^\s\"()&|!<>:'-][^\s\"()&|!<>:']*")


def check_config(config) -> None:
    if config is not None and str(config).lower() not in CONFIGS:
        raise SqlError("0A000", f"text search configuration {config!r} is not supported: "
                                "varvedb analyzes a query with the column's own analyzer "
                                "(give the query alone, or 'simple')")


def _refuse(what: str) -> SqlError:
    return SqlError("0A000", f"to_tsquery: {what} has no form in varvedb's query syntax")


class _TsParser:
    """to_tsquery's grammar: or := and ('|' and)*; and := follow ('&' follow)*;
    follow := unary ('<->' unary)*; unary := '!' unary | '(' or ')' | operand."""

    def __init__(self, text: str):
        self.tokens = []
        at = 0
        text = text.rstrip()
        while at < len(text):
            m = _TS_TOKEN.match(text, at)
            if m is None or m.end() == at:
                raise SqlError("42601", f"syntax error in tsquery: {text!r}")
            follow, distance, op, quoted, qprefix, bare, suffix = m.groups()
            if distance:
                raise _refuse(f"the distance {distance}")
            if follow:
                self.tokens.append(("op", "<->"))
            elif op:
                self.tokens.append(("op", op))
            else:
                word = quoted.replace("''", "'") if quoted is not None else bare
                suffix = qprefix or suffix
                if suffix and suffix != ":*":
                    raise _refuse(f"the weight {suffix!r}")
                self.tokens.append(("prefix" if suffix else "word", word))
            at = m.end()
        self.at = 0

    def peek(self):
        return self.tokens[self.at] if self.at < len(self.tokens) else ("end", "")

    def take(self):
        token = self.peek()
        self.at += 1
        return token

    def parse(self):
        if not self.tokens:
            raise SqlError("42601", "text-search query doesn't contain lexemes")
        node = self.disjunction()
        if self.peek()[0] != "end":
            raise SqlError("42601", f"syntax error in tsquery at {self.peek()[1]!r}")
        return node

    def _chain(self, op, sub, make):
        items = [sub()]
        while self.peek() == ("op", op):
            self.take()
            items.append(sub())
        return items[0] if len(items) == 1 else make(items)

    def disjunction(self):
        return self._chain("|", self.conjunction, lambda xs: Or(tuple(xs)))

    def conjunction(self):
        return self._chain("&", self.follows, lambda xs: And(tuple(xs)))

    def follows(self):
        def phrase(items):
            if not all(isinstance(x, Term) for x in items):
                raise _refuse("<-> around anything but words")
            return Phrase(tuple(x.text for x in items))
        return self._chain("<->", self.unary, phrase)

    def unary(self):
        kind, value = self.take()
        if (kind, value) == ("op", "!"):
            return Not(self.unary())
        if (kind, value) == ("op", "("):
            node = self.disjunction()
            if self.take() != ("op", ")"):
                raise SqlError("42601", "syntax error in tsquery: unclosed '('")
            return node
        if kind == "word":
            return Term(value)
        if kind == "prefix":
            return Prefix(value)
        raise SqlError("42601", f"syntax error in tsquery at {value!r}" if value
                       else "syntax error in tsquery: it ends early")


def to_tsquery(text: str) -> str:
    """varvedb's query for to_tsquery's `text`."""
    return _text(_TsParser(text).parse())


def websearch_to_tsquery(text: str) -> str:
    """varvedb's query for websearch_to_tsquery's `text` (never a syntax error)."""
    groups: list[list] = [[]]
    at, n = 0, len(text)
    negate = False
    while at < n:
        c = text[at]
        if c == '"':
            end = text.find('"', at + 1)
            end = n if end < 0 else end
            words = _WORD.findall(text[at + 1:end].replace("-", " "))
            at = end + 1
            if words:
                item = Phrase(tuple(words)) if len(words) > 1 else Term(words[0])
                groups[-1].append(Not(item) if negate else item)
            negate = False
            continue
        if c == "-" and (at == 0 or text[at - 1].isspace()):
            negate = True
            at += 1
            continue
        m = _WORD.match(text, at)
        if m is None:
            at += 1
            if c.isspace():
                negate = False
            continue
        word = m.group()
        at = m.end()
        if word.lower() == "or" and not negate:
            if groups[-1]:
                groups.append([])
            continue
        groups[-1].append(Not(Term(word)) if negate else Term(word))
        negate = False
    groups = [g for g in groups if g]
    if not groups:
        raise SqlError("42601", "text-search query doesn't contain lexemes")
    ands = [g[0] if len(g) == 1 else And(tuple(g)) for g in groups]
    return _text(ands[0] if len(ands) == 1 else Or(tuple(ands)))


def plainto_tsquery(text: str) -> str:
    """varvedb's query for plainto_tsquery's `text`: every word required."""
    words = _WORD.findall(text)
    if not words:
        raise SqlError("42601", "text-search query doesn't contain lexemes")
    terms = [Term(w) for w in words]
    return _text(terms[0] if len(terms) == 1 else And(tuple(terms)))


def _text(node) -> str:
    """The query syntax of a tree, every word quoted where the syntax would read it
    as something else; a tree of negations only is refused."""
    if not _positive(node):
        raise _refuse("a query of negations only")
    return unparse(_quoted(node))


def _positive(node) -> bool:
    """Whether a row can match only by holding something (a negation alone matches
    nearly every row, which varvedb's syntax refuses)."""
    if isinstance(node, Not):
        return False
    if isinstance(node, And):
        return any(_positive(c) for c in node.children) and all(
            _positive(c) or isinstance(c, Not) for c in node.children)
    if isinstance(node, Or):
        return all(_positive(c) for c in node.children)
    return True


_PLAIN = re.compile(r"[^\s()\"*-][^\s()\"]*")


def _quoted(node):
    if isinstance(node, Term):
        text = node.text
        plain = _PLAIN.fullmatch(text) and text != "OR" and not text.endswith("*")
        return node if plain else Phrase((text.replace('"', " "),))
    if isinstance(node, Prefix):
        if not _PLAIN.fullmatch(node.text) or node.text == "OR":
            raise _refuse(f"the prefix {node.text!r}:*")
        return node
    if isinstance(node, Phrase):
        return Phrase(tuple(w.replace('"', " ") for w in node.terms))
    if isinstance(node, Not):
        return Not(_quoted(node.child))
    return type(node)(tuple(_quoted(c) for c in node.children))


# SQL's name -> the translation of its query text
CONSTRUCTORS = {"to_tsquery": to_tsquery, "websearch_to_tsquery": websearch_to_tsquery,
                "plainto_tsquery": plainto_tsquery}
