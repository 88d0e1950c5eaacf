"""What the maintenance verbs answer, as plain data, with nothing of the engine
imported: the embedded verbs (Database.branch, diff, vacuum) build them, and
vv.Client builds the same classes from the server's JSON (the client loads no
engine). BackupInfo and VerifyReport live beside their code in storage/. And
the bar of rows an index still takes, drawn by the engine and the client alike.
"""
from __future__ import annotations

from dataclasses import dataclass, field

PROGRESS_FROM = 50_000   # rows left from which rows_bar shows a bar (on a terminal)


@dataclass
class BranchInfo:
    name: str
    parent: str | None         # None for main
    fork: int                  # the parent's version it sees, no later
    created: int               # the version that made it (0 for main)
    head: int                  # its newest version (its fork's, before its own commits)


@dataclass
class Changes:
    """What changed in one collection from one view to another (ids, sorted)."""
    added: list = field(default_factory=list)
    changed: list = field(default_factory=list)
    deleted: list = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.added or self.changed or self.deleted)


@dataclass
class VacuumReport:
    oldest: int            # the oldest version kept (as_of anything older is an error)
    version: int           # the newest
    rows_kept: int         # row versions in the base
    rows_dropped: int      # row versions no kept version can see
    bytes_before: int      # bytes of the file in use (its preallocated tail aside)
    bytes_after: int
    seconds: float


def rows_bar(left: int, desc: str, progress: bool | None):
    """A bar of `left` rows to index, saying `desc`, or None: with `progress`, or
    (None) from PROGRESS_FROM rows left when stderr is a terminal."""
    if not left or not (progress or (progress is None and left >= PROGRESS_FROM)):
        return None
    from tqdm import tqdm
    return tqdm(total=left, unit="rows", unit_scale=True, desc=desc,
                disable=None if progress is None else False)
