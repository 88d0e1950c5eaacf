"""A collection sharded over N varvedb files, each held by a Ray actor (extra:
`varvedb[ray]`; the README's "Ray").

    from varvedb.integrations.sharded import ShardedCollection
    docs = ShardedCollection.create("docs.shards", "docs",
                                    {"title": "text", "vec": vv.Vector(384)}, shards=4)
    docs.insert([{"id": 1, "title": "...", "vec": v}, ...])
    hits = docs.search(vector=q, where="year > $1", params=[2020], limit=10)
    then = docs.version                 # a version vector: one version a shard
    docs.delete(ids=[1]); docs.count(as_of=then)

The folder holds `shards.json` (the collection, the shard count, the files),
one varvedb file a shard (`shard-000.varve`, ...), and `decisions.log`, the
coordinator's record of two-phase commits. A row lives on the shard a hash of
its id names (blake2b of the id's bytes, modulo the shard count, fixed at
creation), so every row needs its id. Each file is opened by one Ray actor
(`_Shard`) for as long as the ShardedCollection is open; this process, the
coordinator, is the only writer (a lock file says so to a second one).

Reads fan out to every shard and merge: a search asks each for its `limit`
best (every shard's exact top k holds the global exact top k, so an exact
search answers exactly what one collection would), merged by score (ties by
id: a shard's own ties go by row, which is id order when ids are inserted
ascending, as one collection's go); `count` sums; `get` asks the id's shard.
Every read is at one version vector: the newest complete one (a write spanning
shards becomes visible on all of them at once, never half) or `as_of=` a
vector this object gave out.

Full-text scores compare across shards: BM25 depends on the corpus (rows with
a text, their mean length, each query word's document frequency), so a text
search first asks every shard for its statistics of the query at the read's
versions (Collection.corpus_stats), sums them (text/corpus.py CorpusStats)
and sends the sum in the request: each shard scores its rows, those the
maintainer has not indexed yet too, as one collection holding every row would.
A hybrid search (text and vector, fused by reciprocal rank) runs its two legs
that way, each merged over the shards to its `candidates` best, and fuses
them here with the fusion the embedded path runs (query/execute.py `fuse`):
each leg's ranks are global ones. A rerank orders the text leg's global
candidates by exact distance, each shard its own. A batch (vectors=) is refused.

Writes: rows are split by shard. A write on one shard is that shard's own
commit. A write on several is a two-phase commit: every shard PREPARES it (its
part written durably to a side file beside the shard, `<file>.2pc/<txn>`, then
applied in an open transaction, which checks it as a commit would: ids taken,
types, filters), the coordinator records COMMIT in decisions.log (fsync: the
commit point), then every shard commits (its transaction, or after a restart
its side file applied again) and removes the side file. A shard that refuses
to prepare aborts the write on all of them: nothing changes. Each shard's
commit also records the write's id in the file's `sharding_txns` collection,
so a part is never applied twice. Recovery, when the folder is opened: each
side file still present is committed if decisions.log says COMMIT for it and
dropped otherwise. A shard actor that dies mid-write is started again on its
file and finishes its part the same way; one that dies during a write on its
shard alone is started again too, and the write raises TransactionError: it
may or may not have committed (a read says).

`import varvedb` imports none of this; this module imports Ray.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
import time
import uuid
import zlib

import msgspec
import numpy as np
import ray
from ray.exceptions import RayActorError, RayTaskError

from ..errors import (CorruptFileError, FieldTypeError, NotSupportedError, OptionError,
                      TransactionError, VarveError, WriterLockedError)
from ..query.bind import leg_rows
from ..query.execute import fuse
from ..query.request import Search
from ..results import Hit, Hits
from ..schema import brief
from ..storage.file import fsync_dir

MANIFEST = "shards.json"
DECISIONS = "decisions.log"
LOCK = "coordinator.lock"
TXNS = "sharding_txns"      # in each shard's file: the ids of the writes it committed
MAX_SHARDS = 1024
RESTART_GUARD_S = 300.0     # a dead actor's file lock is released when its process ends


def shard_of(id, shards: int) -> int:
    """The shard an id's row lives on: stable across processes and machines."""
    if isinstance(id, str):
        try:
            key = b"s" + id.encode()
        except UnicodeEncodeError:
            raise FieldTypeError(f"id {brief(id)} is not valid Unicode (a lone surrogate "
                                 "cannot be stored)") from None
    elif isinstance(id, (int, np.integer)) and not isinstance(id, (bool, np.bool_)):
        if not -(1 << 63) <= int(id) < (1 << 63):
            raise FieldTypeError(f"id {int(id)} is outside the 64-bit range")
        key = b"i" + int(id).to_bytes(8, "little", signed=True)
    else:
        raise FieldTypeError(f"a sharded collection's rows need an int or text id, got "
                             f"{brief(id)}")
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little") % shards


def _enc_hook(v):
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(f"a value of type {type(v).__name__} cannot be written")


_encoder = msgspec.msgpack.Encoder(enc_hook=_enc_hook)
_decoder = msgspec.msgpack.Decoder()


def _write_durably(path: str, data: bytes) -> None:
    """`data` as the file `path`, on disk before this returns (file and name)."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, path)
    fsync_dir(path)


class _Shard:
    """One shard's file, opened in a Ray actor (ShardedCollection starts them)."""

    def __init__(self, path: str, collection: str, schema=None):
        import varvedb as vv
        deadline = time.monotonic() + RESTART_GUARD_S
        while True:     # a killed predecessor's lock goes with its process
            try:
                self.db = vv.connect(path)
                break
            except WriterLockedError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        if schema is not None and collection not in self.db.collections():
            with self.db.transaction():
                self.db.create_collection(collection, schema)
                self.db.create_collection(TXNS, {"id": "text"})
        self.coll = self.db.collection(collection)
        self.txns = self.db.collection(TXNS)
        self.side = path + ".2pc"
        os.makedirs(self.side, exist_ok=True)
        self.open: dict = {}        # txn -> the Session holding its prepared part

    def version(self) -> int:
        return self.db.version

    def pending(self) -> list[str]:
        """The writes prepared here and not yet committed or dropped."""
        names = os.listdir(self.side)
        for n in names:
            if n.endswith(".tmp"):      # a prepare that never finished writing
                os.unlink(os.path.join(self.side, n))
        return sorted(n for n in names if not n.endswith(".tmp"))

    def write(self, part: dict) -> int:
        """A write on this shard alone: its own commit; returns the version."""
        with self.db.transaction():
            self._apply(part)
        return self.db.version

    def prepare(self, txn: str, part: dict) -> None:
        """Phase one: the part on disk, then applied in a transaction left open."""
        path = os.path.join(self.side, txn)
        _write_durably(path, _encoder.encode(part))
        sess = self.db.session()
        sess.begin()
        try:
            self._apply(part, sess)
            sess.collection(TXNS).insert({"id": txn})
        except BaseException:
            sess.rollback()
            os.unlink(path)
            raise
        self.open[txn] = sess

    def commit(self, txn: str) -> int:
        """Phase two: the prepared part committed (again from its side file after a
        restart, unless this file already holds it); returns the version."""
        path = os.path.join(self.side, txn)
        sess = self.open.pop(txn, None)
        if sess is not None:
            sess.commit()
        elif self.txns.get(txn) is None:
            with open(path, "rb") as f:
                part = _decoder.decode(f.read())
            with self.db.transaction():
                self._apply(part)
                self.txns.insert({"id": txn})
        _drop(path)
        return self.db.version

    def abort(self, txn: str) -> None:
        sess = self.open.pop(txn, None)
        if sess is not None:
            sess.rollback()
        _drop(os.path.join(self.side, txn))

    def _apply(self, part: dict, sess=None) -> None:
        coll = self.coll if sess is None else sess.collection(self.coll.name)
        verb = part["verb"]
        if verb == "insert":
            coll.insert(part["rows"])
        elif verb == "upsert":
            coll.upsert(part["rows"])
        elif part.get("ids") is not None:
            coll.delete(ids=part["ids"])
        else:
            coll.delete(where=part["where"], params=part["params"])

    def search(self, request: Search) -> list:
        return list(self.coll.run(request))

    def corpus(self, request: Search):
        return self.coll.corpus_stats(request)

    def count(self, where, params, as_of) -> int:
        return self.coll.count(where, params, as_of)

    def get(self, ids: list, as_of, select) -> list:
        return self.coll.get(ids=ids, as_of=as_of, select=select)

    def wait_indexed(self, field, timeout) -> bool:
        return self.coll.wait_indexed(field, timeout)

    def close(self) -> None:
        for txn in list(self.open):       # rolled back, the side files kept (recovery's)
            self.open.pop(txn).rollback()
        self.db.close()


_ShardActor = ray.remote(num_cpus=0, max_restarts=0)(_Shard)


def _drop(side_file: str) -> None:
    """A side file removed for good (its write committed or dropped), if there."""
    if os.path.exists(side_file):
        os.unlink(side_file)
        fsync_dir(side_file)


def _files(shards: int) -> list[str]:
    """The shards' file names in a folder, in order (shards.json lists them)."""
    return [f"shard-{k:03d}.varve" for k in range(shards)]


def _row_list(rows) -> list:
    """rows as Collection takes them: a dict, or an iterable of them (not a str)."""
    if isinstance(rows, dict):
        return [rows]
    if isinstance(rows, (str, bytes, bytearray)) or not hasattr(rows, "__iter__"):
        raise FieldTypeError(f"rows are a dict or a list of dicts, got {brief(rows)}")
    return list(rows)


def _id_list(ids) -> list:
    """ids= as Collection takes it: a list, tuple, range or 1-d array (a str is
    one id, never a list of its characters)."""
    if isinstance(ids, np.ndarray) and ids.ndim == 1:
        return ids.tolist()
    if not isinstance(ids, (list, tuple, range)):
        raise FieldTypeError(f"ids is a list of ids, got {brief(ids)}")
    return list(ids)


def _unwrap(e: Exception) -> Exception:
    """The error a shard raised, as its own type (Ray wraps it)."""
    if isinstance(e, RayTaskError):
        cause = e.cause if hasattr(e, "cause") else None
        if isinstance(cause, Exception):
            return cause
    return e


class ShardedCollection:
    """See the module docstring. Made by `create` or `open`; `close` (or `with`)
    ends the shards' actors."""

    @classmethod
    def create(cls, folder, name: str, schema: dict, shards: int = 4) -> "ShardedCollection":
        """A new folder of `shards` empty shards of collection `name` (`schema` as
        create_collection takes it; ids int unless the schema says "id": "text")."""
        if not isinstance(name, str) or not name or name == TXNS:
            raise OptionError(f"a collection's name, got {brief(name)}")
        if type(shards) is not int or not 1 <= shards <= MAX_SHARDS:
            raise OptionError(f"shards is an integer in 1..{MAX_SHARDS}, got {brief(shards)}")
        if not isinstance(schema, dict):
            raise OptionError(f"a schema is a dict of fields, got {brief(schema)}")
        folder = os.path.abspath(os.fspath(folder))
        try:
            os.makedirs(folder)
        except FileExistsError:
            raise OptionError(f"{folder} exists: a sharded collection is made in a new "
                              "folder (ShardedCollection.open opens one)") from None
        manifest = {"format": 1, "collection": name, "shards": shards,
                    "files": _files(shards)}
        self = cls._start(folder, manifest, schema)
        _write_durably(os.path.join(folder, MANIFEST), json.dumps(manifest).encode())
        return self

    @classmethod
    def open(cls, folder) -> "ShardedCollection":
        """The sharded collection in `folder`, its interrupted writes finished or
        dropped by decisions.log (module docstring)."""
        folder = os.path.abspath(os.fspath(folder))
        try:
            with open(os.path.join(folder, MANIFEST), "rb") as f:
                manifest = json.loads(f.read())
            ok = (manifest.get("format") == 1 and isinstance(manifest.get("collection"), str)
                  and type(manifest.get("shards")) is int
                  and 1 <= manifest["shards"] <= MAX_SHARDS
                  and manifest.get("files") == _files(manifest["shards"]))
        except FileNotFoundError:
            raise OptionError(f"{folder} is not a sharded collection (no {MANIFEST})") from None
        except (ValueError, AttributeError):
            ok = False
        if not ok:
            raise CorruptFileError(f"{os.path.join(folder, MANIFEST)} is not a manifest this "
                                   "version of varvedb wrote")
        return cls._start(folder, manifest, None)

    @classmethod
    def _start(cls, folder: str, manifest: dict, schema) -> "ShardedCollection":
        self = cls.__new__(cls)
        self.folder, self.name = folder, manifest["collection"]
        self.paths = [os.path.join(folder, f) for f in manifest["files"]]
        self._lock = os.open(os.path.join(folder, LOCK), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock)
            raise WriterLockedError(f"{folder} is open in another process (one "
                                    "coordinator writes a sharded collection)") from None
        self._schema = schema
        self._writing = threading.Lock()     # one write's two phases at a time
        # started together, waited for together: a worker process each
        self.actors = [_ShardActor.remote(p, self.name, schema) for p in self.paths]
        try:
            ray.get([a.version.remote() for a in self.actors])
            self._recover()
        except BaseException:
            self.close()
            raise
        return self

    def _new_actor(self, k: int):
        actor = _ShardActor.remote(self.paths[k], self.name, self._schema)
        ray.get(actor.version.remote())     # opened (an error here is the constructor's)
        return actor

    def _call(self, calls: list[tuple]) -> list:
        """[(shard, method, args)] run on their actors at once; a dead actor is started
        again on its file and asked once more (every method but a one-shard write is
        safe to ask twice: reads, and the two phases, which a write id makes
        idempotent). The first error a shard raised is raised as its own type
        (every call is waited for first)."""
        refs = [getattr(self.actors[k], m).remote(*a) for k, m, a in calls]
        try:
            return ray.get(refs)            # the common case, in one wait
        except Exception:
            pass                            # each call again below: which one, and why
        out, first = [], None
        for (k, m, a), ref in zip(calls, refs):
            try:
                out.append(ray.get(ref))
                continue
            except RayActorError:
                pass
            except Exception as e:
                out.append(None)
                first = first or _unwrap(e)
                continue
            try:
                self.actors[k] = self._new_actor(k)
                if m == "write":    # it may have committed before the process ended
                    raise TransactionError(
                        f"shard {k}'s process ended during a write, which it may or may "
                        "not have committed: read to see (the shard is open again)")
                out.append(ray.get(getattr(self.actors[k], m).remote(*a)))
            except Exception as e:
                out.append(None)
                first = first or _unwrap(e)
        if first is not None:
            raise first
        return out

    # ---- two-phase commit ------------------------------------------------------------

    def _decisions(self) -> dict:
        """txn -> "commit" of decisions.log's whole records (a torn last one is not)."""
        out = {}
        try:
            with open(os.path.join(self.folder, DECISIONS), "rb") as f:
                lines = f.read().split(b"\n")
        except FileNotFoundError:
            return out
        for line in lines:
            crc, _, body = line.partition(b" ")
            try:
                if int(crc, 16) == zlib.crc32(body):
                    record = json.loads(body)
                    out[record["txn"]] = record["decision"]
            except (ValueError, KeyError, TypeError):
                continue
        return out

    def _decide(self, txn: str) -> None:
        """The commit point: COMMIT for `txn` on disk."""
        body = json.dumps({"txn": txn, "decision": "commit"}).encode()
        fd = os.open(os.path.join(self.folder, DECISIONS),
                     os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, b"%08x %s\n" % (zlib.crc32(body), body))
            os.fsync(fd)
        finally:
            os.close(fd)

    def _recover(self) -> None:
        pending = self._call([(k, "pending", ()) for k in range(len(self.actors))])
        decided = self._decisions()
        calls = [(k, "commit" if decided.get(txn) == "commit" else "abort", (txn,))
                 for k, txns in enumerate(pending) for txn in txns]
        if calls:
            self._call(calls)
        # every write finished: the log's records are spent
        path = os.path.join(self.folder, DECISIONS)
        if os.path.exists(path):
            _write_durably(path, b"")
        self._vector = tuple(self._call([(k, "version", ()) for k in range(len(self.actors))]))

    def _write(self, parts: dict) -> None:
        """{shard: part} applied atomically; the version vector moves once, at the end."""
        if not parts:
            return
        with self._writing:
            vector = list(self._vector)
            if len(parts) == 1:
                (k, part), = parts.items()
                try:
                    vector[k], = self._call([(k, "write", (part,))])
                except TransactionError:
                    # its process ended, the write perhaps committed: reads must see
                    # what the shard holds now (one shard: the vector stays whole)
                    vector[k], = self._call([(k, "version", ())])
                    self._vector = tuple(vector)
                    raise
                self._vector = tuple(vector)
                return
            txn = uuid.uuid4().hex
            self._prepare(txn, parts)
            self._decide(txn)
            self._finish(txn, parts, vector)

    def _prepare(self, txn: str, parts: dict) -> None:
        try:
            self._call([(k, "prepare", (txn, part)) for k, part in parts.items()])
        except BaseException:
            try:
                self._call([(k, "abort", (txn,)) for k in parts])
            except VarveError:
                pass        # a side file left is dropped by the next recovery
            raise

    def _finish(self, txn: str, parts: dict, vector: list) -> None:
        for k, v in zip(parts, self._call([(k, "commit", (txn,)) for k in parts])):
            vector[k] = v
        self._vector = tuple(vector)

    # ---- the verbs -------------------------------------------------------------------

    @property
    def shards(self) -> int:
        return len(self.actors)

    @property
    def version(self) -> tuple:
        """The version vector reads see now: one version a shard."""
        return self._vector

    def _by_shard(self, rows) -> dict:
        parts: dict = {}
        for r in _row_list(rows):
            if not isinstance(r, dict):
                raise FieldTypeError(f"a row is a dict, got {brief(r)}")
            if "id" not in r:
                raise FieldTypeError("a sharded collection's rows need their id (it "
                                     "places the row)")
            parts.setdefault(shard_of(r["id"], self.shards), []).append(r)
        return parts

    def _ids_by_shard(self, ids: list) -> dict:
        by: dict = {}
        for i in ids:
            by.setdefault(shard_of(i, self.shards), []).append(i)
        return by

    def _write_rows(self, verb: str, rows) -> list:
        rows = _row_list(rows)
        self._write({k: {"verb": verb, "rows": rs} for k, rs in self._by_shard(rows).items()})
        return [r["id"] for r in rows]      # in the rows' order, as Collection's

    def insert(self, rows) -> list:
        """Insert rows (dicts, each with its id); all of them or none. Returns the ids."""
        return self._write_rows("insert", rows)

    def upsert(self, rows) -> list:
        """Insert rows or merge each into the live document with its id (as
        Collection.upsert); all of them or none. Returns the ids."""
        return self._write_rows("upsert", rows)

    def delete(self, ids: list | None = None, where: str | None = None,
               params: list | tuple = ()) -> None:
        """Delete by ids (on their shards) or by a filter (on every shard), atomically."""
        if (ids is None) == (where is None):
            raise FieldTypeError("give exactly one of ids= or where=")
        if ids is not None:
            by = self._ids_by_shard(_id_list(ids))
            self._write({k: {"verb": "delete", "ids": v} for k, v in by.items()})
        else:
            part = {"verb": "delete", "ids": None, "where": where, "params": list(params)}
            self._write({k: part for k in range(self.shards)})

    def _as_of(self, as_of) -> tuple:
        if as_of is None:
            return self._vector
        if not (isinstance(as_of, tuple) and len(as_of) == self.shards
                and all(type(v) is int and v >= 0 for v in as_of)):
            raise FieldTypeError(f"as_of is a version vector of {self.shards} versions "
                                 f"(a ShardedCollection.version), got {brief(as_of)}")
        return as_of

    def get(self, id=None, as_of=None, select=None, *, ids: list | None = None):
        """get(id): the document or None; get(ids=[...]): those found, in that order."""
        vector = self._as_of(as_of)
        wanted = [id] if ids is None else _id_list(ids)
        by = self._ids_by_shard(wanted)
        found = {}
        for docs in self._call([(k, "get", (v, vector[k], select)) for k, v in by.items()]):
            found.update((d["id"], d) for d in docs)
        if ids is None:
            return found.get(id)
        return [found[i] for i in dict.fromkeys(wanted) if i in found]

    def count(self, where: str | None = None, params: list | tuple = (), as_of=None) -> int:
        vector = self._as_of(as_of)
        return sum(self._call([(k, "count", (where, list(params), vector[k]))
                               for k in range(self.shards)]))

    def search(self, vector=None, where: str | None = None, params: list | tuple = (),
               limit: int = 10, select: list | None = None, as_of=None, **knobs) -> Hits:
        """Collection.search's request (field, ef, exact, metric, probes, text,
        text_field, match, vector_text, rrf_k, weights, candidates, ...) on every
        shard at one version vector, merged: by distance (lower is closer), by
        BM25 with the whole corpus's statistics (higher is better), or fused by
        reciprocal rank (module docstring)."""
        versions = self._as_of(as_of)
        request = Search.of(vector, where, params, limit, select, **knobs)
        if request.branch is not None:
            raise NotSupportedError("a sharded collection has no branches")
        if request.vectors is not None:
            raise NotSupportedError("a sharded collection answers one query at a time "
                                    "(vectors= is not built)")
        v, t = request.vector, request.text
        vector = v is not None and (v.vector is not None or v.text is not None)
        if t is None or t.text is None:
            return Hits(self._leg(request, versions))
        corpus = self._call([(k, "corpus", (msgspec.structs.replace(request,
                                                                    as_of=versions[k]),))
                             for k in range(self.shards)])
        t = msgspec.structs.replace(t, corpus=sum(corpus[1:], corpus[0]))
        if not vector:
            return Hits(self._leg(msgspec.structs.replace(request, text=t), versions))
        n = leg_rows(request)
        if request.rerank:
            return Hits(self._rerank(request, t, n, versions))
        legs = [self._leg(msgspec.structs.replace(request, vector=None, text=t, limit=n),
                          versions),
                self._leg(msgspec.structs.replace(request, text=None, limit=n), versions)]
        found = {h.id: h for leg in legs for h in leg}
        ids = sorted(found)                     # fuse's ties go by key: by id here
        at = {i: j for j, i in enumerate(ids)}
        keys, fused = fuse([np.array([at[h.id] for h in leg], np.int64) for leg in legs],
                           request.weights, request.rrf_k)
        return Hits([Hit(ids[j], float(f), found[ids[j]].fields)
                     for j, f in zip(keys[:request.limit].tolist(), fused.tolist())])

    def _rerank(self, request: Search, t, n: int, versions: tuple) -> list:
        """rerank=: the text leg's `n` best across the shards (scored with the whole
        corpus's statistics), then each shard orders those of its own by exact
        distance — its rerank over just those ids, which all match the text and
        the filter already — and the answers merge by (distance, id)."""
        chosen = self._leg(msgspec.structs.replace(request, vector=None, rerank=False,
                                                   text=t, limit=n), versions)
        by: dict = {}
        for h in chosen:
            by.setdefault(shard_of(h.id, self.shards), []).append(h.id)
        calls = []
        for k, ids in by.items():
            where = "id IN (" + ", ".join(f"${i + 1}" for i in range(len(ids))) + ")"
            calls.append((k, "search", (msgspec.structs.replace(
                request, text=t, where=where, params=tuple(ids), candidates=len(ids),
                limit=len(ids), as_of=versions[k]),)))
        hits = sorted((h for hs in self._call(calls) for h in hs),
                      key=lambda h: (h.score, h.id))
        return hits[:request.limit]

    def _leg(self, request: Search, versions: tuple) -> list:
        """One ranked leg on every shard, merged to its `limit` best: by distance for
        a vector leg, by score (higher first) for a text one; ties by id."""
        answers = self._call([(k, "search", (msgspec.structs.replace(request,
                                                                     as_of=versions[k]),))
                              for k in range(self.shards)])
        text = request.text is not None and request.text.text is not None
        sign = -1.0 if text else 1.0
        hits = sorted((h for hs in answers for h in hs), key=lambda h: (sign * h.score, h.id))
        return hits[:request.limit]

    def wait_indexed(self, field: str | None = None, timeout: float | None = None) -> bool:
        """Collection.wait_indexed on every shard: True once each shard's index of
        `field` covers its rows, False if `timeout` seconds passed first on one."""
        return all(self._call([(k, "wait_indexed", (field, timeout))
                               for k in range(self.shards)]))

    def close(self) -> None:
        """End the shards' actors (their files closed) and release the folder."""
        for actor in getattr(self, "actors", ()):
            if actor is not None:
                try:
                    ray.get(actor.close.remote())
                except RayActorError:
                    pass
                ray.kill(actor)
        self.actors = []
        if getattr(self, "_lock", None) is not None:
            os.close(self._lock)
            self._lock = None

    def __enter__(self) -> "ShardedCollection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
