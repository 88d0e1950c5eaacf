"""The PostgreSQL v3 wire protocol in front of `db.sql()` (docs/pgwire.md).

`varvedb serve FILE --pg PORT` answers psql, psycopg and other PostgreSQL
clients: messages.py frames and parses the protocol's messages, types.py
names each column's type (OIDs) and turns values into text or binary and
parameters back into Python values, scram.py authenticates with
SCRAM-SHA-256, connection.py runs one client's conversation (startup, the
simple and extended query protocols, errors, transaction status) on a
Session of its own, and server.py listens and hands connections out.
"""
