"""`Pins`: the versions open readers hold, which a vacuum keeps.

A block that reads the state of its BEGIN (SQL's REPEATABLE READ: Session's
`sql_version`) reads one version across statements, while other sessions
commit and vacuum. It holds that version here from its BEGIN to its first
write, COMMIT, ROLLBACK, close or failure (a statement in it failed with no
SAVEPOINT to go back to: PostgreSQL's aborted transaction holds no snapshot
either; Session.sql_failed); a vacuum keeps the history from the oldest
version held (vacuum.oldest_kept), as PostgreSQL's VACUUM never removes what
an open snapshot sees. The holders are held weakly: a session dropped with its
block open lets its version go. Pins are this connection's: a reader in
another process holds nothing here; its block fails with 40001 once its
refresh() loads a vacuumed file without its version (Session.snapshot).
"""
from __future__ import annotations

import threading
import weakref


class Pins:
    def __init__(self, engine):
        self._engine = engine
        self._held: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def hold(self, owner) -> int:
        """Hold the newest visible version for `owner` (replacing what it held);
        returns it. Read under the lock that `oldest` takes, so a vacuum either
        sees this pin or began after this version was the newest."""
        with self._lock:
            v = self._engine.visible
            self._held[owner] = v
            return v

    def release(self, owner) -> None:
        with self._lock:
            self._held.pop(owner, None)

    def oldest(self) -> int | None:
        """The oldest version held (None: none is)."""
        with self._lock:
            return min(self._held.values(), default=None)
