"""PostgreSQL's tsquery: its constructors, its tree, its text, and its reading
into varvedb's own query syntax.

SQL's `to_tsquery([config,] text)`, `plainto_tsquery`, `phraseto_tsquery` and
`websearch_to_tsquery` make a `TsQuery`: the tree as written (`words`) and
the tree of lexemes its configuration makes of it (`tree`: each word analyzed
as text/tsconfig.py's configuration does; a stop word removed and the
distances of the phrases around it widened, as PostgreSQL's cleanup does;
None: the empty query). Its text is PostgreSQL's (`'fat' & 'rat' | !'cat'`).
to_tsvector's `@@` and ts_rank read `tree` (query/tsearch.py).

A varvedb full-text column asked `body @@ to_tsquery('a | b')` (its own
dialect) reads `words` instead, as varvedb's query text (`varvedb_text`):
the words are analyzed by the column's own analyzer. What maps: a word,
`word:*` a prefix, `&`, `|`, `!`, `<->` between words (a phrase) and
parentheses; websearch_to_tsquery's words, `"phrases"`, `or` and `-word`;
plainto_tsquery's words, all required. What does not (`<N>` distances, `<->`
around a group, a query of negations only) is refused with SqlError 0A000.
Weights (`word:A`) are refused everywhere (0A000): varvedb's tsvectors carry
none.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from ..errors import SqlError
from .query import And, Not, Or, Phrase, Prefix, Term, unparse
from .tsconfig import config_name

# to_tsquery's tokens: operators, parentheses, quoted or bare operands
_TS_TOKEN = re.compile(r"\s*(?:(<->)|<(\d+)>|([&|!()])|'((?:[^']|'')*)'(:\*)?|"
                       r"([^\s&|!()<>':]+)(:\*|:[A-Za-z*]+)?)")
# a word of websearch_to_tsquery / plainto_tsquery: what is not a separator
_WORD = re.compile(r"[^\s\"()&|!<>:'-][^\s\"()&|!<>:']*")
MAX_DISTANCE = 16384


@dataclass(frozen=True)
class Word:
    """An operand: a word as written, or a lexeme once analyzed."""
    text: str
    prefix: bool = False


@dataclass(frozen=True)
class TsOp:
    """A binary operator: '&', '|' or '<->' (followed by, `distance` apart)."""
    op: str
    left: object
    right: object
    distance: int = 1


@dataclass(frozen=True)
class TsQuery:
    """A tsquery value: `tree` of lexemes (None: empty), `words` as written."""
    tree: object
    words: object
    config: str

    def __str__(self) -> str:
        return "" if self.tree is None else infix(self.tree)


def _refuse(what: str) -> SqlError:
    return SqlError("0A000", f"to_tsquery: {what} has no form in varvedb's query syntax")


def _syntax(text: str) -> SqlError:
    return SqlError("42601", f'syntax error in tsquery: "{text}"')


class _TsParser:
    """to_tsquery's grammar: or := and ('|' and)*; and := follow ('&' follow)*;
    follow := unary ('<N>' unary)*; unary := '!' unary | '(' or ')' | operand."""

    def __init__(self, text: str):
        self.text = text
        self.tokens = []
        at = 0
        text = text.rstrip()
        while at < len(text):
            m = _TS_TOKEN.match(text, at)
            if m is None or m.end() == at:
                raise _syntax(self.text)
            follow, distance, op, quoted, qprefix, bare, suffix = m.groups()
            if follow or distance:
                d = 1 if follow else int(distance)
                if d > MAX_DISTANCE:
                    raise SqlError("22023", "distance in phrase operator must be an integer "
                                            f"value between zero and {MAX_DISTANCE} inclusive")
                self.tokens.append(("op", "<->", d))
            elif op:
                self.tokens.append(("op", op, 0))
            else:
                word = quoted.replace("''", "'") if quoted is not None else bare
                suffix = qprefix or suffix
                if suffix and suffix != ":*":
                    raise SqlError("0A000", f"tsquery weights ({suffix!r}) are not supported: "
                                            "varvedb's tsvectors carry no weights")
                self.tokens.append(("prefix" if suffix else "word", word, 0))
            at = m.end()
        self.at = 0

    def peek(self):
        return self.tokens[self.at] if self.at < len(self.tokens) else ("end", "", 0)

    def take(self):
        token = self.peek()
        self.at += 1
        return token

    def parse(self):
        """The tree, or None for a text without operands (PostgreSQL's empty query)."""
        if not self.tokens:
            return None
        node = self.disjunction()
        if self.peek()[0] != "end":
            raise _syntax(self.text)
        return node

    def _chain(self, op, sub):
        node = sub()
        while self.peek()[:2] == ("op", op):
            distance = self.take()[2]
            node = TsOp(op, node, sub(), distance if op == "<->" else 1)
        return node

    def disjunction(self):
        return self._chain("|", self.conjunction)

    def conjunction(self):
        return self._chain("&", self.follows)

    def follows(self):
        return self._chain("<->", self.unary)

    def unary(self):
        kind, value, _ = self.take()
        if (kind, value) == ("op", "!"):
            return Not(self.unary())
        if (kind, value) == ("op", "("):
            node = self.disjunction()
            if self.take()[:2] != ("op", ")"):
                raise _syntax(self.text)
            return node
        if kind in ("word", "prefix"):
            return Word(value, kind == "prefix")
        if kind == "end":
            raise SqlError("42601", f'no operand in tsquery: "{self.text}"')
        raise _syntax(self.text)


# ---- the configuration's lexemes ------------------------------------------------

@functools.lru_cache(maxsize=4)
def _analyzer(config: str):
    from .analyzer import Analyzer
    return Analyzer(config=config)


def lexemes(config: str, texts: list[str]) -> list[list[tuple[str, int]]]:
    """Each text's (lexeme, position) pairs as `config` makes them (positions 1-based)."""
    batch = _analyzer(config).analyze_batch(texts)
    out: list[list] = [[] for _ in texts]
    vocab = batch.vocab
    for d, p, t in zip(batch.doc.tolist(), batch.pos.tolist(), batch.term.tolist()):
        out[d].append((vocab[t], p + 1))
    return out


def _chain(pairs, op: str, prefix: bool = False):
    """Lexemes joined by `op` ('<->': each its positions' distance after the last)."""
    node, last = None, None
    for lex, pos in pairs:
        w = Word(lex, prefix)
        node = w if node is None else TsOp(op, node, w, pos - last if op == "<->" else 1)
        last = pos
    return node


_STOP = object()     # a word its configuration drops


def _analyzed(words_tree, config: str):
    """The tree of lexemes: each word analyzed (several lexemes: a phrase of them;
    none: a stop word, cleaned out with PostgreSQL's rules)."""
    found: dict[str, None] = {}

    def collect(n):
        if isinstance(n, Word):
            found[n.text] = None
        elif isinstance(n, Not):
            collect(n.child)
        elif isinstance(n, TsOp):
            collect(n.left)
            collect(n.right)
    collect(words_tree)
    texts = list(found)
    made = dict(zip(texts, lexemes(config, texts)))

    def swap(n):
        if isinstance(n, Word):
            return _chain(made[n.text], "<->", n.prefix) or _STOP
        if isinstance(n, Not):
            return Not(swap(n.child))
        return TsOp(n.op, swap(n.left), swap(n.right), n.distance)
    return _clean(swap(words_tree))[0]


def _clean(n):
    """(node or None, distance to add on its left, on its right): PostgreSQL's
    removal of stop words, which keeps a phrase's other words as far apart."""
    if n is _STOP:
        return None, 0, 0
    if isinstance(n, Word):
        return n, 0, 0
    if isinstance(n, Not):
        child, ladd, radd = _clean(n.child)
        return (None if child is None else Not(child)), ladd, radd
    left, lladd, lradd = _clean(n.left)
    right, rladd, rradd = _clean(n.right)
    phrase = n.op == "<->"
    d = n.distance if phrase else 0
    if left is None and right is None:
        both = lladd + d + rladd if phrase else max(lladd, rladd)
        return None, both, both
    if left is None:
        return right, (lladd + d + rladd if phrase else rladd), rradd
    if right is None:
        return left, lladd, (lradd + d + rradd if phrase else lradd)
    if phrase:
        return TsOp("<->", left, right, d + lradd + rladd), lladd, rradd
    return TsOp(n.op, left, right), 0, 0


# ---- the constructors -------------------------------------------------------------

def _query(words_tree, config) -> TsQuery:
    name = config_name(config)
    tree = None if words_tree is None else _analyzed(words_tree, name)
    return TsQuery(tree, words_tree, name)


def to_tsquery(config, text: str) -> TsQuery:
    return _query(_TsParser(text).parse(), config)


def _words_joined(config, text: str, op: str) -> TsQuery:
    """plainto_tsquery (op '&') and phraseto_tsquery ('<->'): the text's words
    joined by `op` (a phrase's distances: its lexemes' positions apart)."""
    name = config_name(config)
    written = _chain(((w, 0) for w in _WORD.findall(text)), op.replace("<->", "&"))
    if op == "<->" and written is not None:
        written = _relinked(written)
    return TsQuery(_chain(lexemes(name, [text])[0], op), written, name)


def _relinked(n):
    """A chain of & as the same chain of <-> (the words as written, one apart)."""
    if isinstance(n, TsOp):
        return TsOp("<->", _relinked(n.left), n.right)
    return n


def tsquery_in(text: str) -> TsQuery:
    """tsquery's input function ('fat & rat'::tsquery): to_tsquery's grammar, its
    operands kept as written (no configuration analyzes them)."""
    tree = _TsParser(text).parse()
    return TsQuery(tree, tree, "simple")


def plainto_tsquery(config, text: str) -> TsQuery:
    return _words_joined(config, text, "&")


def phraseto_tsquery(config, text: str) -> TsQuery:
    return _words_joined(config, text, "<->")


def infix(n, parent: int = 0, right_of_phrase: bool = False) -> str:
    """PostgreSQL's text of a tree: operators by priority (| & <-> !), parentheses
    where a lower one stands under a higher one, or a phrase right of a phrase."""
    if isinstance(n, Word):
        text = "'" + n.text.replace("\\", "\\\\").replace("'", "''") + "'"
        return text + (":*" if n.prefix else "")
    if isinstance(n, Not):
        inner = "!" + infix(n.child, 4)
        return f"( {inner} )" if 4 < parent else inner
    prio = _PRIORITY[n.op]
    op = n.op if n.op != "<->" or n.distance == 1 else f"<{n.distance}>"
    text = f"{infix(n.left, prio)} {op} {infix(n.right, prio, n.op == '<->')}"
    if prio < parent or (n.op == "<->" and right_of_phrase):
        return f"( {text} )"
    return text


_PRIORITY = {"|": 1, "&": 2, "<->": 3}


def websearch_words(text: str):
    """websearch_to_tsquery's tree as written (None: no words): quoted words a
    phrase, `or` between groups, `-` a negation, the rest all required (it never
    fails, as PostgreSQL's does not)."""
    groups: list[list] = [[]]
    at, n = 0, len(text)
    negate = False
    while at < n:
        c = text[at]
        if c == '"':
            end = text.find('"', at + 1)
            end = n if end < 0 else end
            words = [Word(w) for w in _WORD.findall(text[at + 1:end].replace("-", " "))]
            at = end + 1
            if words:
                item = words[0]
                for w in words[1:]:
                    item = TsOp("<->", item, w)
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
        groups[-1].append(Not(Word(word)) if negate else Word(word))
        negate = False
    tree = None
    for g in (g for g in groups if g):
        conj = g[0]
        for item in g[1:]:
            conj = TsOp("&", conj, item)
        tree = conj if tree is None else TsOp("|", tree, conj)
    return tree


def websearch_to_tsquery(config, text: str) -> TsQuery:
    return _query(websearch_words(text), config)


# SQL's name -> the constructor (config or None, text) -> TsQuery
CONSTRUCTORS = {"to_tsquery": to_tsquery, "websearch_to_tsquery": websearch_to_tsquery,
                "plainto_tsquery": plainto_tsquery, "phraseto_tsquery": phraseto_tsquery}


# ---- varvedb's own query syntax ----------------------------------------------------

def varvedb_text(q: TsQuery) -> str:
    """The query as varvedb's query text, from its words as written (a varvedb
    column's analyzer reads them)."""
    if q.words is None:
        raise SqlError("42601", "text-search query doesn't contain lexemes")
    return _text(_varvedb_node(q.words))


def _varvedb_node(n):
    if isinstance(n, Word):
        return Prefix(n.text) if n.prefix else Term(n.text)
    if isinstance(n, Not):
        return Not(_varvedb_node(n.child))
    if n.op == "<->":
        words = _phrase_words(n)
        return Phrase(tuple(words))
    kind = And if n.op == "&" else Or
    children = []
    for side in (n.left, n.right):
        child = _varvedb_node(side)
        children.extend(child.children if isinstance(child, kind) else (child,))
    return kind(tuple(children))


def _phrase_words(n) -> list:
    if isinstance(n, Word) and not n.prefix:
        return [n.text]
    if isinstance(n, TsOp) and n.op == "<->":
        if n.distance != 1:
            raise _refuse(f"the distance <{n.distance}>")
        return _phrase_words(n.left) + _phrase_words(n.right)
    raise _refuse("<-> around anything but words")


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
