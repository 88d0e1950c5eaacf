"""`varvedb serve`: one database file over HTTP (docs/server.md).

app.py holds the door (token, body cap, thread pool, timeouts, errors),
routes.py the verbs, openapi.py their document, metrics.py GET /metrics, and
run.py starts uvicorn; workers.py and follower.py are `--workers N`'s supervisor,
writer and read workers. Needs the `server` extra (starlette, uvicorn, prometheus-client).
"""
from .app import build_app
from .run import serve
from .workers import serve_workers

__all__ = ["build_app", "serve", "serve_workers"]
