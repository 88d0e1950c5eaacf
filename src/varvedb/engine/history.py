"""The history: one `Commit` per version, oldest first (engine.py keeps the list,
checkpoint.py writes and loads it)."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Commit:
    """One entry of the history: a version and what made it."""
    version: int
    timestamp_us: int
    chain: bytes
    rows_changed: int
    branch: int = 0         # the branch it was made on (branches.py); 0 is main
