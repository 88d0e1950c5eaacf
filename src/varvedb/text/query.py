"""The full-text query language: parse a query into a tree, bind it to a field.

The same syntax in the API (`search(text=...)`) and in SQL (`body @@ 'query'`):

    word word        both words (And: words side by side are all required)
    "exact phrase"   the words in this order, adjacent
    a OR b           either (OR, upper case, binds looser than side by side)
    -word  -"p q"  -(a OR b)    excludes
    prefix*          any term starting with prefix
    ( ... )          groups

`parse` gives the query as written (a Term's text is the word as typed);
`bind` analyzes it for one field (its Analyzer: folding, stemming). Every
group must hold something positive: a query (or a parenthesised group, or an
operand of OR) of only negations would match nearly every row, so it is a
syntax error, as are an unclosed quote or parenthesis, a dangling OR, a lone
`-`, an empty phrase and an empty query. Positions are 1-based character
offsets into the query.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import QuerySyntaxError
from .analyzer import Analyzer


@dataclass(frozen=True)
class Term:
    text: str


@dataclass(frozen=True)
class Prefix:
    text: str          # without the '*'


@dataclass(frozen=True)
class Phrase:
    terms: tuple[str, ...]


@dataclass(frozen=True)
class And:
    children: tuple


@dataclass(frozen=True)
class Or:
    children: tuple


@dataclass(frozen=True)
class Not:
    child: object


Node = Term | Prefix | Phrase | And | Or | Not

_SPECIAL = '()"'


def _lex(text: str) -> list[tuple[str, str, int]]:
    """(kind, value, position) per token: kind is one of ( ) - OR word phrase end."""
    out = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch in "()":
            out.append((ch, ch, i + 1))
            i += 1
        elif ch == '"':
            close = text.find('"', i + 1)
            if close < 0:
                raise QuerySyntaxError(f"unclosed quote at position {i + 1}", i + 1)
            words = tuple(text[i + 1:close].split())
            if not words:
                raise QuerySyntaxError(f"empty phrase at position {i + 1}", i + 1)
            out.append(("phrase", words, i + 1))
            i = close + 1
        elif ch == "-":
            if i + 1 >= n or text[i + 1].isspace() or text[i + 1] in ")-":
                raise QuerySyntaxError(f"a lone '-' at position {i + 1} (write -word, "
                                       '-"phrase" or -(...))', i + 1)
            out.append(("-", "-", i + 1))
            i += 1
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in _SPECIAL:
                j += 1
            word = text[i:j]
            out.append(("OR" if word == "OR" else "word", word, i + 1))
            i = j
    out.append(("end", "", n + 1))
    return out


MAX_QUERY_DEPTH = 64     # parentheses within parentheses (the parser and tree walks recurse)


class _Parser:
    def __init__(self, text: str):
        self.tokens = _lex(text)
        self.at = 0
        self.depth = 0

    def peek(self):
        return self.tokens[self.at]

    def take(self):
        token = self.tokens[self.at]
        self.at += 1
        return token

    def query(self) -> Node:
        if self.peek()[0] == "end":
            raise QuerySyntaxError("empty query at position 1", 1)
        node = self.disjunction()
        kind, _, position = self.peek()
        if kind == ")":
            raise QuerySyntaxError(f"unmatched ')' at position {position}", position)
        return node

    def disjunction(self) -> Node:
        operands = [self.conjunction()]
        while self.peek()[0] == "OR":
            self.take()
            operands.append(self.conjunction())
        return operands[0] if len(operands) == 1 else Or(tuple(operands))

    def conjunction(self) -> Node:
        kind, _, position = self.peek()
        if kind == "OR":
            raise QuerySyntaxError(f"OR at position {position} has nothing before it",
                                   position)
        if kind in ("end", ")"):
            # nothing here: after an OR, a ')' too many, or a '(' at the end (an
            # empty query and () are caught before)
            before_kind, _, before = self.tokens[self.at - 1] if self.at else ("", "", 0)
            if before_kind == "OR":
                raise QuerySyntaxError(f"OR at position {before} has nothing after it",
                                       before)
            if kind == ")":
                raise QuerySyntaxError(f"unmatched ')' at position {position}", position)
            raise QuerySyntaxError(f"unclosed '(' at position {before}", before)
        items = []
        while self.peek()[0] not in ("OR", "end", ")"):
            items.append(self.unary())
        if all(isinstance(item, Not) for item in items):
            raise QuerySyntaxError(
                f"only negations at position {position}: a group needs a word to "
                "match as well as words to exclude", position)
        return items[0] if len(items) == 1 else And(tuple(items))

    def unary(self) -> Node:
        if self.peek()[0] == "-":
            self.take()
            return Not(self.primary())
        return self.primary()

    def primary(self) -> Node:
        kind, value, position = self.take()
        if kind == "word":
            if value.endswith("*"):
                stem = value.rstrip("*")
                if not stem:
                    raise QuerySyntaxError(f"'*' at position {position} needs a word "
                                           "before it", position)
                return Prefix(stem)
            return Term(value)
        if kind == "phrase":
            return Phrase(value)
        if kind == "(":
            if self.peek()[0] == ")":
                raise QuerySyntaxError(f"empty parentheses at position {position}",
                                       position)
            self.depth += 1
            if self.depth > MAX_QUERY_DEPTH:
                raise QuerySyntaxError(f"'(' at position {position} is nested more than "
                                       f"{MAX_QUERY_DEPTH} levels deep", position)
            node = self.disjunction()
            if self.peek()[0] != ")":
                raise QuerySyntaxError(f"unclosed '(' at position {position}", position)
            self.take()
            self.depth -= 1
            return node
        if kind == ")":
            raise QuerySyntaxError(f"unmatched ')' at position {position}", position)
        if kind == "-":
            raise QuerySyntaxError(f"a lone '-' at position {position}", position)
        if kind == "OR":
            raise QuerySyntaxError(f"OR at position {position} has nothing before it",
                                   position)
        raise QuerySyntaxError(f"{value!r} at position {position} is out of place",
                               position)


def parse(text: str) -> Node:
    """The query's tree, as written; QuerySyntaxError (with .position) if malformed."""
    return _Parser(text).query()


def unparse(node: Node) -> str:
    """The query syntax of a tree (parse(unparse(t)) == t for a tree parse can give)."""
    if isinstance(node, Term):
        return node.text
    if isinstance(node, Prefix):
        return node.text + "*"
    if isinstance(node, Phrase):
        return '"' + " ".join(node.terms) + '"'
    if isinstance(node, Not):
        inner = unparse(node.child)
        return "-" + (inner if isinstance(node.child, (Term, Prefix, Phrase))
                      else f"({inner})")
    if isinstance(node, And):
        return " ".join(f"({unparse(c)})" if isinstance(c, (And, Or)) else unparse(c)
                        for c in node.children)
    return " OR ".join(f"({unparse(c)})" if isinstance(c, Or) else unparse(c)
                       for c in node.children)


_FOLD_ONLY = Analyzer()


def bind(node: Node, analyzer: Analyzer) -> Node | None:
    """The tree with each word analyzed as `analyzer` does the field's text.

    A word of several tokens becomes a Phrase of them (a phrase of one token,
    a Term); a word of none is dropped, and a group left with nothing positive
    goes with it: None if nothing is left. A prefix is folded, not stemmed (a
    stem is not a prefix of its word's forms); `state-of*` becomes the phrase
    before the last token And that token as a prefix."""
    if isinstance(node, Term):
        return _terms(analyzer.analyze(node.text))
    if isinstance(node, Phrase):
        return _terms([t for word in node.terms for t in analyzer.analyze(word)])
    if isinstance(node, Prefix):
        spans = _FOLD_ONLY.spans(node.text)
        if not spans:
            return None
        start, _, last = spans[-1]
        lead = _terms(analyzer.analyze(node.text[:start]))
        return Prefix(last) if lead is None else And((lead, Prefix(last)))
    if isinstance(node, Not):
        child = bind(node.child, analyzer)
        return None if child is None else Not(child)
    children = tuple(c for c in (bind(c, analyzer) for c in node.children) if c is not None)
    if not any(not isinstance(c, Not) for c in children):
        return None
    return children[0] if len(children) == 1 else type(node)(children)


def _terms(tokens: list[str]) -> Node | None:
    if not tokens:
        return None
    return Term(tokens[0]) if len(tokens) == 1 else Phrase(tuple(tokens))
