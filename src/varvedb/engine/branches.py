"""Branches: named lines of versions in one log, and the view one reader has of them.

Versions are numbered in the order commits are written, whatever their
branch. Each commit records the branch it was made on (storage/format.py),
and the one chain hash runs through every commit of every branch, so
`verify()` proves them all and an anchor of any version still checks.

A branch B forked from P at version f sees P as of f, then its own commits.
What one reader sees is a `View`: the (branch, cut) segments from main down
to its branch — main up to the first fork, each branch up to the next, its
own branch up to the version read. A row version is visible in a view when
the segment of the branch it was born on holds its birth and not its death
(`died` is stamped only by its own branch), and no later segment of the view
deleted it (a branch's deletes of its ancestors' rows are kept apart, in
`Table.deaths`, so the ancestor never sees them). Nothing is copied at a fork:
a branch costs one commit and the rows it writes.

The schema (collections, fields, indexes) is one for every branch, so it is
changed on main only; a collection dropped is gone from every branch.

Why a merge is one commit of plain writes: the target's new row versions are
copies of the source's documents, born on the target, so a merged branch can
be dropped (or vacuumed away) without touching what it gave.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import NotFoundError, OptionError
from ..schema import brief, validate_name

MAIN = 0
HEAD = (1 << 63) - 2      # a cut past every version: the writer's own, open transaction too


@dataclass(frozen=True)
class View:
    segments: tuple[tuple[int, int], ...]     # (branch id, cut), main first

    @property
    def branch(self) -> int:
        return self.segments[-1][0]

    @property
    def version(self) -> int:
        return self.segments[-1][1]

    @property
    def main_only(self) -> bool:
        return len(self.segments) == 1 and self.segments[0][0] == MAIN

    def holds(self, branch: int, version: int) -> bool:
        """Is a commit of (branch, version) part of what this view sees?"""
        return any(b == branch and version <= cut for b, cut in self.segments)


def main_view(version: int) -> View:
    return View(((MAIN, version),))


@dataclass
class Branch:
    id: int
    name: str
    parent: int               # -1 for main
    fork: int                 # the parent's version it sees, no later
    created: int              # the version of its first commit (0 for main)
    dropped: int = 0          # the version that dropped it (0: it lives)
    # source branch id -> (its version merged, the merge's version): the base of
    # the next merge of that source into this branch
    merged: dict[int, tuple[int, int]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "parent": self.parent, "fork": self.fork,
                "created": self.created, "dropped": self.dropped,
                "merged": [[s, v, m] for s, (v, m) in self.merged.items()]}

    @classmethod
    def from_dict(cls, d: dict) -> "Branch":
        return cls(d["id"], d["name"], d["parent"], d["fork"], d["created"], d["dropped"],
                   {s: (v, m) for s, v, m in d["merged"]})


class Catalog:
    """Every branch the log has made, dropped ones too (their ids are never reused)."""

    def __init__(self):
        self.by_id: dict[int, Branch] = {MAIN: Branch(MAIN, "main", -1, 0, 0)}

    @property
    def any(self) -> bool:
        """Has a branch other than main ever been made?"""
        return len(self.by_id) > 1

    @property
    def next_id(self) -> int:
        return max(self.by_id) + 1

    def live(self) -> list[Branch]:
        return [b for b in self.by_id.values() if not b.dropped]

    def named(self, name) -> Branch:
        if not isinstance(name, str):
            raise OptionError(f"a branch is named by a str, got {brief(name)}")
        for b in self.by_id.values():
            if b.name == name and not b.dropped:
                return b
        raise NotFoundError(f"no branch named {name!r}; the branches are "
                            f"{sorted(b.name for b in self.live())}")

    def view(self, branch: int, version: int) -> View:
        """What a reader of `branch` as of `version` sees."""
        segs = []
        b, cut = self.by_id[branch], version
        while True:
            segs.append((b.id, cut))
            if b.parent < 0:
                return View(tuple(reversed(segs)))
            cut = min(cut, b.fork)
            b = self.by_id[b.parent]

    def check_new_name(self, name) -> str:
        validate_name(name, "branch")
        if any(b.name == name and not b.dropped for b in self.by_id.values()):
            raise OptionError(f"a branch named {name!r} exists already")
        return name

    def to_list(self) -> list[dict]:
        return [b.to_dict() for b in self.by_id.values() if b.id != MAIN] + \
            [self.by_id[MAIN].to_dict()]

    @classmethod
    def from_list(cls, items: list[dict]) -> "Catalog":
        c = cls()
        for d in items:
            b = Branch.from_dict(d)
            c.by_id[b.id] = b
        return c
