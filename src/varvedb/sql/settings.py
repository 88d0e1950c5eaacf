"""The settings SET / SHOW and current_setting() know: those a session sets
(pgvector's hnsw.* / ivfflat.*, with their defaults) and those SHOW reports of the
server, fixed."""
from __future__ import annotations

from ..query.expr import POSTGRES_VERSION

# name -> (default, parse(text) -> value)
SETTINGS = {
    "hnsw.ef_search": (None, "int"),
    "hnsw.iterative_scan": ("off", "choice"),
    "hnsw.max_scan_tuples": (20000, "int"),
    "ivfflat.probes": (None, "int"),
}
# what SHOW reports of the server (drivers and ORMs ask at connect); fixed
REPORTED = {"server_version": POSTGRES_VERSION,
            "server_version_num": "%d%04d" % tuple(map(int, POSTGRES_VERSION.split("."))),
            "server_encoding": "UTF8", "client_encoding": "UTF8",
            "standard_conforming_strings": "on", "integer_datetimes": "on",
            "datestyle": "ISO, MDY", "timezone": "UTC", "intervalstyle": "postgres",
            "search_path": '"$user", public', "max_identifier_length": "63",
            "transaction_isolation": "serializable", "jit": "off",
            "default_table_access_method": "heap", "bytea_output": "hex",
            # pgvector's README tunes these: varvedb reads no configuration file, and
            # its rows are the file mapped through the page cache (no buffer pool of
            # its own: shared_buffers SHOWs the memory it may map, storage/memory.py)
            "config_file": ""}


def setting_text(name: str, session) -> str | None:
    """A setting's value as SHOW and current_setting() give it (None: no such setting)."""
    name = name.lower()
    spec = SETTINGS.get(name)
    if spec is None and name == "shared_buffers":
        from ..storage.memory import memory_limit
        return f"{memory_limit() >> 20}MB"
    if spec is None:
        return REPORTED.get(name)
    value = session.settings.get(name, spec[0])
    return "index default" if value is None else str(value)
