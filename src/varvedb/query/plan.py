"""Plans as data: the tree of nodes a read is answered by.

A node is a small dataclass: its own parameters, and the node(s) it reads
from (`input`). `collection.explain(...)` returns the tree the planner built,
without running it; `hits.plan` is the tree as it ran, with the strategy a
vector top-k actually used (a walk short of k is widened, then answered
exactly). Both print as an indented EXPLAIN-style tree (`str(plan)`) and
compare as data (`plan.to_dict()`); tests assert on the dict, never the prose.

Nodes read from one input today; `inputs()` is the one place that says so,
so a node that reads several (a text top-k fused with a vector one) adds
itself without changing the printers. A node may carry what it needs to
run (a bound filter, a query vector) in fields marked `run_only`: they are
left out of `to_dict()` and of the printed tree.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, ClassVar, Iterator


def run_only(default=None) -> Any:
    """A field the executor uses that is not part of the plan's data."""
    return field(default=default, repr=False, compare=False, metadata={"run_only": True})


class Strategy(StrEnum):
    """How a vector top-k finds its rows."""
    EXACT = "exact"                 # score every allowed row
    GRAPH = "graph"                 # walk the HNSW graph with the allow-mask
    WIDENED = "widened"             # the walk came back short of k: walked again, wider
    GRAPH_THEN_EXACT = "graph_then_exact"   # still short: answered by the exact scan
    LISTS = "lists"                 # scan the IVF index's nearest lists with the allow-mask
    LISTS_WIDENED = "lists_widened"     # short of k: more lists scanned
    LISTS_THEN_EXACT = "lists_then_exact"   # still short: answered by the exact scan


_STRATEGY_WORDS = {Strategy.EXACT: "exact scan", Strategy.GRAPH: "graph walk",
                   Strategy.WIDENED: "widened walk",
                   Strategy.GRAPH_THEN_EXACT: "graph walk short of k, then exact scan",
                   Strategy.LISTS: "IVF lists", Strategy.LISTS_WIDENED: "IVF lists, widened",
                   Strategy.LISTS_THEN_EXACT: "IVF lists short of k, then exact scan"}
LIST_STRATEGIES = (Strategy.LISTS, Strategy.LISTS_WIDENED, Strategy.LISTS_THEN_EXACT)


@dataclass(slots=True, eq=False)
class PlanNode:
    NODE: ClassVar[str] = "?"
    # what the run met rather than what was planned (the maintainer's progress):
    # in to_dict and the printed tree, not in ==, so a kept plan equals a fresh one
    VOLATILE: ClassVar[tuple[str, ...]] = ()

    def inputs(self) -> tuple["PlanNode", ...]:
        inp = getattr(self, "input", None)
        return () if inp is None else (inp,)

    def params(self) -> dict:
        """This node's own data: every field but its inputs and run-only parts."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)
                if f.name != "input" and not f.metadata.get("run_only")}

    def to_dict(self, volatile: bool = True) -> dict:
        d = {"node": self.NODE, **self.params()}
        if not volatile:
            for k in self.VOLATILE:
                d.pop(k, None)
        ins = self.inputs()
        if ins:
            d["input"] = ins[0].to_dict(volatile) if len(ins) == 1 else \
                [i.to_dict(volatile) for i in ins]
        return d

    def walk(self) -> Iterator["PlanNode"]:
        """Every node of the tree, this one first (depth first)."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.inputs()))

    def find(self, cls: type) -> "PlanNode | None":
        """The first node of type `cls` in the tree, or None."""
        return next((n for n in self.walk() if isinstance(n, cls)), None)

    def describe(self) -> str:
        """This node alone, on one line."""
        return self.NODE

    def brief(self) -> str:
        """The whole tree on one line, outermost node first."""
        return " <- ".join(n.describe() for n in self.walk())

    def __str__(self) -> str:
        lines, stack = [], [(self, 0)]
        while stack:
            node, depth = stack.pop()
            lines.append(("  " * depth + "-> " if depth else "") + node.describe())
            stack.extend((i, depth + 1) for i in reversed(node.inputs()))
        return "\n".join(lines)

    def __eq__(self, other) -> bool:
        return isinstance(other, PlanNode) and self.to_dict(False) == other.to_dict(False)

    __hash__ = None


@dataclass(slots=True, eq=False)
class Scan(PlanNode):
    """The row versions of a collection visible at a version (and with a
    non-null `nonnull` field, for a vector search)."""
    NODE: ClassVar[str] = "Scan"
    collection: str
    version: int
    rows: int                   # row versions in the snapshot (visible or not)
    visible: int | None = None  # of them visible (None: not counted at plan time)
    nonnull: str | None = None

    def describe(self) -> str:
        what = f"Scan {self.collection} as of version {self.version}"
        if self.nonnull:
            what += f", {self.nonnull} not null"
        if self.visible is None:
            return f"{what} ({self.rows:,} row versions)"
        return f"{what} ({self.visible:,} of {self.rows:,} row versions)"


@dataclass(slots=True, eq=False)
class Filter(PlanNode):
    """Rows of the input that satisfy a where= expression (a numpy mask)."""
    NODE: ClassVar[str] = "Filter"
    where: str
    input: PlanNode
    matched: int | None = None  # rows that pass (None: not counted at plan time)
    bound: Any = run_only()     # the query.filter.Filter, bound to schema and params

    def describe(self) -> str:
        tail = "" if self.matched is None else f" ({self.matched:,} rows)"
        return f"Filter {self.where}{tail}"


@dataclass(slots=True, eq=False)
class VectorTopK(PlanNode):
    """The k input rows nearest to a query vector, by `strategy`."""
    NODE: ClassVar[str] = "VectorTopK"
    field: str
    metric: str
    k: int                      # as asked (limit=); above the allowed rows, all of them
    strategy: Strategy
    allowed: int                # input rows it chooses among
    input: PlanNode
    ef: int | None = None       # the walk's width, or the IVF lists probed (None: exact)
    reason: str = ""            # why exact, when it is
    scanned: int | None = None  # IVF: the allowed rows its lists held, once it ran
    # once it ran: rows above the index's watermark (committed, not yet linked by
    # the maintainer), scanned exactly beside the walk
    unlinked: int | None = None
    linked: int | None = None   # beside unlinked: the rows the index covered
    # the field's index expression it ranks by (SQL's `embedding::halfvec(3)`), as
    # written; "": the field's own vectors
    expr: str = ""
    # the name of the further index of the field it ranks through (Field.more_indexes,
    # Table.vector_choices); "": the field's own
    index: str = ""
    query: Any = run_only()     # the query vector
    VOLATILE: ClassVar[tuple[str, ...]] = ("unlinked", "linked")

    def params(self) -> dict:
        d = PlanNode.params(self)
        if self.unlinked is None:
            del d["unlinked"], d["linked"]
        if not self.expr:
            del d["expr"]
        if not self.index:
            del d["index"]
        return d

    def describe(self) -> str:
        using = f" using {self.index}" if self.index else ""
        what = f"VectorTopK {self.expr or self.field} ({self.metric}){using} k={self.k}: " \
               f"{_STRATEGY_WORDS[self.strategy]}"
        if self.ef is not None:
            what += f" probes={self.ef}" if self.strategy in LIST_STRATEGIES \
                else f" ef={self.ef}"
        if self.scanned is not None:
            what += f" ({self.scanned:,} rows scanned)"
        if self.unlinked:
            what += f" over {self.linked:,} linked rows + exact scan of {self.unlinked:,} " \
                    "rows not yet indexed"
        if self.reason:
            what += f" ({self.reason})"
        return f"{what}, {self.allowed:,} rows allowed"


@dataclass(slots=True, eq=False)
class TextTopK(PlanNode):
    """The k input rows that best match a full-text query, by BM25 (higher is
    better), with the statistics of the rows the snapshot sees, or the ones the
    request brought (`corpus`: a sharded collection's, text/corpus.py)."""
    NODE: ClassVar[str] = "TextTopK"
    field: str
    query: str
    k: int
    allowed: int                # input rows it chooses among
    input: PlanNode
    pruned: bool = True         # dynamic pruning (False: every match scored)
    match: str = "all"          # words side by side: all required, or any
    bound: Any = run_only()     # the query tree, analyzed as the field's words
    corpus: Any = run_only()    # a CorpusStats to score with (None: the snapshot's)

    def describe(self) -> str:
        how = "pruned by block bounds" if self.pruned else "every match scored"
        words = "" if self.match == "all" else f" match={self.match}"
        return f"TextTopK {self.field} @@ {self.query!r}{words} k={self.k} (bm25, {how}), " \
               f"{self.allowed:,} rows allowed"


@dataclass(slots=True, eq=False)
class Fusion(PlanNode):
    """Reciprocal-rank fusion of ranked legs: a row's score is the sum over the
    legs that found it of weight / (rrf_k + rank), rank 1-based."""
    NODE: ClassVar[str] = "Fusion"
    rrf_k: int
    weights: tuple
    legs: tuple

    def inputs(self) -> tuple:
        return self.legs

    def params(self) -> dict:
        return {"rrf_k": self.rrf_k, "weights": list(self.weights)}

    def describe(self) -> str:
        w = ", ".join(f"{x:g}" for x in self.weights)
        return f"Fusion rrf k={self.rrf_k} weights ({w})"


@dataclass(slots=True, eq=False)
class Rerank(PlanNode):
    """The input's rows ordered by exact distance to a query vector (lower is
    better): no graph."""
    NODE: ClassVar[str] = "Rerank"
    field: str
    metric: str
    input: PlanNode
    query: Any = run_only()     # the query vector

    def describe(self) -> str:
        return f"Rerank by {self.field} ({self.metric}), exact distances"


@dataclass(slots=True, eq=False)
class Limit(PlanNode):
    """The first `limit` rows of the input after skipping `offset`, in its order
    (None: all)."""
    NODE: ClassVar[str] = "Limit"
    limit: int | None
    input: PlanNode
    offset: int = 0

    def params(self) -> dict:
        d = {"limit": self.limit}
        if self.offset:
            d["offset"] = self.offset
        return d

    def describe(self) -> str:
        what = "Limit all" if self.limit is None else f"Limit {self.limit:,}"
        return what + (f" offset {self.offset:,}" if self.offset else "")


@dataclass(slots=True, eq=False)
class Lookup(PlanNode):
    """The input's rows of the documents named, in the order named (an id with
    no row among them skipped, one named twice answered once)."""
    NODE: ClassVar[str] = "Lookup"
    ids: int                    # how many ids are named
    input: PlanNode
    keys: Any = run_only()      # the ids, of the collection's id type

    def describe(self) -> str:
        return f"Lookup {self.ids:,} ids, in their order"


@dataclass(slots=True, eq=False)
class Project(PlanNode):
    """The fields returned with each row (besides id and score)."""
    NODE: ClassVar[str] = "Project"
    fields: tuple
    input: PlanNode

    def describe(self) -> str:
        return f"Project id, {', '.join(self.fields)}" if self.fields else "Project id"


@dataclass(slots=True, eq=False)
class Count(PlanNode):
    """How many rows the input holds."""
    NODE: ClassVar[str] = "Count"
    input: PlanNode

    def describe(self) -> str:
        return "Count"


@dataclass(slots=True, eq=False)
class Derived(PlanNode):
    """The rows of a subquery in FROM, under an alias: the outer query reads
    its output columns."""
    NODE: ClassVar[str] = "Derived"
    alias: str
    input: PlanNode
    columns: tuple = ()
    inner: Any = run_only()       # the planned inner query (planner.Query)

    def describe(self) -> str:
        return f"Subquery {self.alias} ({', '.join(self.columns)})"


@dataclass(slots=True, eq=False)
class Join(PlanNode):
    """Two relations joined (query/relations.py): equal `keys` matched by a
    hash join, the rest of ON (`residual`) tested on the matched pairs, the
    unmatched rows of an outer join's side(s) kept with NULLs opposite."""
    NODE: ClassVar[str] = "Join"
    kind: str                   # inner left right full cross
    keys: tuple                 # ("l.col = r.col", ...) as written
    residual: str | None
    columns: tuple              # qualified output column names, left's then right's
    legs: tuple = ()
    key_exprs: Any = run_only()     # ((left expr, right expr), ...)
    residual_expr: Any = run_only()
    needed: Any = run_only()        # the columns read above it (None: all)

    def inputs(self) -> tuple:
        return self.legs

    def params(self) -> dict:
        return {"kind": self.kind, "keys": list(self.keys), "residual": self.residual,
                "columns": list(self.columns)}

    def describe(self) -> str:
        on = " AND ".join(self.keys + ((self.residual,) if self.residual else ()))
        return f"{self.kind.capitalize()} Join" + (f" on {on}" if on else "")


@dataclass(slots=True, eq=False)
class SetOp(PlanNode):
    """UNION [ALL] of its legs' rows (query/relations.py), columns named as the
    first leg's."""
    NODE: ClassVar[str] = "SetOp"
    op: str                     # union
    all: bool
    columns: tuple
    legs: tuple = ()

    def inputs(self) -> tuple:
        return self.legs

    def params(self) -> dict:
        return {"op": self.op, "all": self.all, "columns": list(self.columns)}

    def describe(self) -> str:
        return f"{self.op.capitalize()}{' All' if self.all else ''} ({', '.join(self.columns)})"


@dataclass(slots=True, eq=False)
class FunctionColumns(PlanNode):
    """A node that adds to its input's rows a column for each of its function calls."""
    functions: tuple            # as written
    input: PlanNode
    exprs: Any = run_only()         # the calls

    def describe(self) -> str:
        return f"{self.NODE} {', '.join(self.functions)}"


@dataclass(slots=True, eq=False)
class Window(FunctionColumns):
    """Ranking window functions (query/window.py) over the input's rows, each
    output as a column `$w<i>`."""
    NODE: ClassVar[str] = "Window"


@dataclass(slots=True, eq=False)
class ProjectSet(FunctionColumns):
    """The set-returning functions of a select list (unnest, generate_subscripts,
    generate_series: query/arrays.py), as PostgreSQL's ProjectSet: each input row
    repeated as often as its longest function yields, the functions side by side
    (a shorter one NULL past its end), each a column `$s<i>`."""
    NODE: ClassVar[str] = "ProjectSet"


@dataclass(slots=True, eq=False)
class FunctionScan(PlanNode):
    """Rows a table function made (varvedb_history), or the one row of a
    SELECT without FROM."""
    NODE: ClassVar[str] = "FunctionScan"
    function: str
    columns: tuple
    rows: int
    cols: Any = run_only()        # name -> expr.Val

    def describe(self) -> str:
        return f"Function {self.function} ({self.rows:,} rows)"


@dataclass(slots=True, eq=False)
class Where(PlanNode):
    """Rows of the input for which an expression is true (evaluated by
    query/expr.py: what the where= grammar of Filter does not cover)."""
    NODE: ClassVar[str] = "Where"
    condition: str
    input: PlanNode
    matched: int | None = None
    expr: Any = run_only()

    def describe(self) -> str:
        tail = "" if self.matched is None else f" ({self.matched:,} rows)"
        return f"Where {self.condition}{tail}"


@dataclass(slots=True, eq=False)
class Aggregate(PlanNode):
    """Groups of input rows (by `groups`; none: one group of all rows) and an
    aggregate per group; `having` keeps the groups it is true for."""
    NODE: ClassVar[str] = "Aggregate"
    groups: tuple
    aggregates: tuple
    input: PlanNode
    having: str | None = None
    group_exprs: Any = run_only(())
    agg_exprs: Any = run_only(())
    having_expr: Any = run_only()

    def describe(self) -> str:
        what = "Aggregate " + ", ".join(self.aggregates)
        if self.groups:
            what += f" group by {', '.join(self.groups)}"
        if self.having:
            what += f" having {self.having}"
        return what


@dataclass(slots=True, eq=False)
class Output(PlanNode):
    """The statement's output columns: names and the expressions that make them."""
    NODE: ClassVar[str] = "Output"
    columns: tuple
    input: PlanNode
    exprs: Any = run_only(())
    keys: Any = run_only(())       # the executor's names of the columns: $o0, $o1, ...

    def __post_init__(self):
        n = len(self.columns)
        self.keys = _OUTPUT_KEYS[n] if n < len(_OUTPUT_KEYS) else \
            tuple(f"$o{i}" for i in range(n))

    def describe(self) -> str:
        return f"Output {', '.join(self.columns)}"


@dataclass(slots=True, eq=False)
class Distinct(PlanNode):
    """The input's rows with duplicates of the output columns removed (first kept)."""
    NODE: ClassVar[str] = "Distinct"
    input: PlanNode

    def describe(self) -> str:
        return "Distinct"


@dataclass(slots=True, eq=False)
class Sort(PlanNode):
    """The input's rows ordered by `keys` (each "expr [DESC] [NULLS FIRST|LAST]")."""
    NODE: ClassVar[str] = "Sort"
    keys: tuple
    input: PlanNode
    key_exprs: Any = run_only(())     # ((expr, descending, nulls_first), ...)

    def describe(self) -> str:
        return f"Sort {', '.join(self.keys)}"


_OUTPUT_KEYS = [tuple(f"$o{i}" for i in range(n)) for n in range(32)]


def _plain(v):
    if isinstance(v, StrEnum):
        return str(v)
    if isinstance(v, tuple):
        return list(v)
    return v



def _node_classes() -> dict[str, type]:
    out, todo = {}, [PlanNode]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if "NODE" in cls.__dict__ and cls is not PlanNode:     # (not a shared base)
            out[cls.NODE] = cls
    return out


def plan_from_dict(d: dict) -> PlanNode:
    """The plan `to_dict()` gave (a server's explain, hits.plan over the wire),
    as plan objects again: equal to the original (==), printed alike. Run-only
    parts (a bound filter, a query vector) are not in the dict and stay unset."""
    from ..errors import OptionError
    if not isinstance(d, dict):
        raise OptionError(f"a plan is a dict with a 'node', got {type(d).__name__}")
    cls = _node_classes().get(d.get("node"))
    if cls is None:
        raise OptionError(f"unknown plan node {d.get('node')!r}")
    kinds = {f.name: str(f.type) for f in fields(cls)}
    args = {}
    for k, v in d.items():
        if k == "input":
            ins = [plan_from_dict(x) for x in (v if isinstance(v, list) else [v])]
            k, v = ("legs", tuple(ins)) if cls in (Fusion, Join, SetOp) else ("input", ins[0])
        elif k not in kinds:
            continue
        elif k == "strategy":
            v = Strategy(v)
        elif isinstance(v, list) and "tuple" in kinds[k]:
            v = tuple(v)
        args[k] = v
    try:
        return cls(**args)
    except TypeError as e:
        raise OptionError(f"a {cls.NODE} plan node lacks a part: {e}") from None
