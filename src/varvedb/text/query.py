"""The full-text query language: parse a query into a tree, bind it to a field.

The same syntax in the API (`search(text=...)`) and in SQL (`body @@ 'query'`):

    word word        both words (And: words side by side are all required); with
                     match="any", either (Or: a row holding any of them matches,
                     ranked by BM25; the -words beside them still exclude)
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

Both steps are linear in the query's length: parse reads each character once
(and checks for cancellation every few thousand tokens, varvedb.cancel) and
stops at MAX_QUERY_WORDS distinct words as written; bind analyzes every
distinct word in one batch and refuses a query of more than MAX_QUERY_TERMS
distinct terms, prefixes and phrases (QueryTooLargeError) before any index is
read. A word may repeat any number of times (each repeat adds to the BM25 sum,
as in Lucene).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..cancel import check as check_canceled
from ..errors import QuerySyntaxError, QueryTooLargeError
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

MAX_QUERY_TERMS = 1024   # distinct terms a bound query may carry (Lucene's clause limit)
# distinct words as written, before analysis (a term may be written several ways)
MAX_QUERY_WORDS = 16 * MAX_QUERY_TERMS


_TOKEN = re.compile(r'(\s+)|([()])|("[^"]*"?)|(-)|([^\s()"]+)')


def _lex(text: str) -> list[tuple[str, str, int]]:
    """(kind, value, position) per token: kind is one of ( ) - OR word phrase end.

    QueryTooLargeError once the words, as written, are more than MAX_QUERY_WORDS
    distinct: so a huge query fails here, in time linear in the words read."""
    out = []
    seen: set[str] = set()
    n = len(text)
    for m in _TOKEN.finditer(text):
        space, paren, quoted, minus, word = m.groups()
        i = m.start()
        if space:
            continue
        if len(out) & 4095 == 4095:
            check_canceled()
        if paren:
            out.append((paren, paren, i + 1))
        elif quoted:
            if len(quoted) < 2 or quoted[-1] != '"':
                raise QuerySyntaxError(f"unclosed quote at position {i + 1}", i + 1)
            words = tuple(quoted[1:-1].split())
            if not words:
                raise QuerySyntaxError(f"empty phrase at position {i + 1}", i + 1)
            seen.update(words)
            out.append(("phrase", words, i + 1))
        elif minus:
            if i + 1 >= n or text[i + 1].isspace() or text[i + 1] in ")-":
                raise QuerySyntaxError(f"a lone '-' at position {i + 1} (write -word, "
                                       '-"phrase" or -(...))', i + 1)
            out.append(("-", "-", i + 1))
        else:
            seen.add(word)
            out.append(("OR" if word == "OR" else "word", word, i + 1))
        if len(seen) > MAX_QUERY_WORDS:
            raise QueryTooLargeError(f"the query holds more than {MAX_QUERY_WORDS:,} "
                                     f"distinct words (at position {i + 1}); a query may "
                                     f"hold at most {MAX_QUERY_TERMS:,} distinct terms",
                                     i + 1)
    out.append(("end", "", n + 1))
    return out


MAX_QUERY_DEPTH = 64     # parentheses within parentheses (the parser and tree walks recurse)


class _Parser:
    def __init__(self, text: str, match: str = "all"):
        self.tokens = _lex(text)
        self.at = 0
        self.depth = 0
        self.any = match == "any"

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
        if self.any and len(items) > 1:
            # any of the positive items, and none of the negated ones
            positive = tuple(item for item in items if not isinstance(item, Not))
            negated = tuple(item for item in items if isinstance(item, Not))
            either = positive[0] if len(positive) == 1 else Or(positive)
            return And((either, *negated)) if negated else either
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


def parse(text: str, match: str = "all") -> Node:
    """The query's tree, as written; QuerySyntaxError (with .position) if malformed.
    `match`: items side by side are And-ed ("all") or Or-ed ("any"; negated items
    are then And-ed with that Or: `a b -c` is `(a OR b) -c`)."""
    return _Parser(text, match).query()


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
    before the last token And that token as a prefix.

    The distinct words are analyzed in one batch (a word repeated costs a
    lookup); QueryTooLargeError if the distinct terms, prefixes and phrases
    (each a posting list to read) are more than MAX_QUERY_TERMS."""
    words: dict[str, None] = {}
    prefixes: dict[str, None] = {}
    _words(node, words, prefixes)
    # a prefix: the word before its last token (analyzed) and that token (folded)
    split = {}
    for text, spans in zip(prefixes, _FOLD_ONLY.spans_batch(list(prefixes))):
        if spans:
            start, _, last = spans[-1]
            split[text] = (text[:start], last)
            words[text[:start]] = None
    batch = analyzer.analyze_batch(list(words))
    vocab = batch.vocab
    _check_size(len(vocab) + len({last for _, last in split.values()}))
    check_canceled()
    starts = np.searchsorted(batch.doc, np.arange(len(words) + 1)).tolist()
    term = batch.term.tolist()
    tokens = {w: [vocab[t] for t in term[starts[i]:starts[i + 1]]]
              for i, w in enumerate(words)}
    phrases: set = set()
    bound = _bind(node, tokens, split, phrases)
    _check_size(len(vocab) + len({last for _, last in split.values()}) + len(phrases))
    return bound


def _check_size(n: int) -> None:
    if n > MAX_QUERY_TERMS:
        raise QueryTooLargeError(f"the query holds {n:,} distinct terms, prefixes and "
                                 f"phrases; a query may hold at most {MAX_QUERY_TERMS:,}",
                                 None)


def _words(node: Node, words: dict, prefixes: dict) -> None:
    """The words (and prefixes) of the tree, each once, in order."""
    if isinstance(node, Term):
        words[node.text] = None
    elif isinstance(node, Phrase):
        words.update(dict.fromkeys(node.terms))
    elif isinstance(node, Prefix):
        prefixes[node.text] = None
    elif isinstance(node, Not):
        _words(node.child, words, prefixes)
    else:
        for c in node.children:
            _words(c, words, prefixes)


def _bind(node: Node, tokens: dict, split: dict, phrases: set) -> Node | None:
    if isinstance(node, Term):
        return _terms(tokens[node.text], phrases)
    if isinstance(node, Phrase):
        return _terms([t for word in node.terms for t in tokens[word]], phrases)
    if isinstance(node, Prefix):
        if node.text not in split:
            return None
        lead_text, last = split[node.text]
        lead = _terms(tokens[lead_text], phrases)
        return Prefix(last) if lead is None else And((lead, Prefix(last)))
    if isinstance(node, Not):
        child = _bind(node.child, tokens, split, phrases)
        return None if child is None else Not(child)
    children = tuple(c for c in (_bind(c, tokens, split, phrases) for c in node.children)
                     if c is not None)
    if not any(not isinstance(c, Not) for c in children):
        return None
    return children[0] if len(children) == 1 else type(node)(children)


def _terms(tokens: list[str], phrases: set) -> Node | None:
    if not tokens:
        return None
    if len(tokens) == 1:
        return Term(tokens[0])
    phrase = Phrase(tuple(tokens))
    phrases.add(phrase.terms)
    return phrase
