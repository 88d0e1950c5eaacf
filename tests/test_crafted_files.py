"""Crafted files: valid hashes, hostile contents. Open raises a VarveError, never worse.

Hashes stop random damage only; a buggy or hostile writer produces frames
whose SHA-256s, CRCs and chain all check out. `Layout` takes a valid file
apart into its frames and `Layout.build` puts it back together *re-sealed*:
every frame hash, frame header CRC, commit digest, chain hash and the
superblock recomputed, so an edited payload reaches the decoders instead of
stopping at a hash.

* the fuzz test builds one valid file (two collections, every field kind, an
  HNSW graph, commits, a checkpoint, commits after it), crafts FUZZ_FILES
  (400; `make soak`: 3000) seeded variants of it (edited meta values, ints,
  array lists, meta lengths, array contents, deep nesting, random payload
  bytes, frames dropped, doubled, moved or re-kinded, superblock fields, raw
  bit flips) and opens each in a child process under an address-space limit
  and a timeout — read-only, the storage's hash checks alone, `verify_file`
  (which also replays the log to the checkpoint and compares), then as a
  writer, each with counts, finds and searches.
  Every outcome is success or a VarveError raised by a check: no other
  exception, no signal, no hang, and no MemoryError or other exception turned
  into CorruptFileError by a backstop. `pytest -s` prints the tally;
* the regression tests pin what the code before the checks did: an insert
  claiming 10**9 rows (a 7.45 GiB allocation), one starting a row late
  (AssertionError), an array shape past its buffer (ValueError), a deeply
  nested meta (RecursionError), an HNSW m of 10**8 (763 GiB), a checkpoint
  whose extents point past the file (ValueError: it is a lost shortcut, so
  open replays the log and sees the same state), and crafted graph arrays in
  a checkpoint (rebuilt);
* lying lengths: frames of a few KiB whose zstd content size, array shape or
  msgpack list declares 1 GiB (a meta of nils or of maps, an array of zeros, a
  content size past the frame, no content size), in an INSERT and in the
  checkpoint, and an IVF dimension of 2**40, each opened in a child capped at a
  plain open's peak address space + 192 MiB: a typed error (or the shortcut
  skipped), never MemoryError.
"""
from __future__ import annotations

import atexit
import copy
import hashlib
import json
import os
import shutil
import struct
import subprocess
import textwrap
from collections import Counter
from dataclasses import dataclass, field, replace

import msgspec
import numpy as np
import pytest
import zstandard

import varvedb as vv
from varvedb.errors import CorruptFileError
from varvedb.storage import format as F
from varvedb.storage import record

from conftest import PYTHON, child_env
from forker import Forker

# ---- taking a file apart and putting it back together, re-sealed -------------------


@dataclass
class Frame:
    kind: int
    payload: bytes


@dataclass
class Txn:
    """One commit: its frames (without the commit frame) and the commit's fields."""
    frames: list[Frame]
    timestamp_us: int
    rows_changed: int


@dataclass
class Layout:
    """A file as its parts: header block, then commits and checkpoints in log order."""
    head: bytes                                   # the 64-byte header
    items: list = field(default_factory=list)     # Txn or Frame (a checkpoint)

    @classmethod
    def parse(cls, raw: bytes) -> "Layout":
        out = cls(raw[:F.HEADER_SIZE])
        pos, pending = F.LOG_START, []
        while pos + F.FRAME_HEADER_SIZE <= len(raw):
            hdr = F.unpack_frame_header(raw[pos:pos + F.FRAME_HEADER_SIZE])
            if hdr is None:
                break
            body = raw[pos + F.FRAME_HEADER_SIZE:pos + F.FRAME_HEADER_SIZE + hdr.length]
            if hdr.kind == F.Kind.COMMIT:
                rec = F.unpack_commit(body)
                out.items.append(Txn(pending, rec.timestamp_us, rec.rows_changed))
                pending = []
            elif hdr.kind == F.Kind.CHECKPOINT:
                out.items.append(Frame(hdr.kind, body))
            else:
                pending.append(Frame(hdr.kind, body))
            pos = F.pad(pos + F.FRAME_HEADER_SIZE + hdr.length)
        assert not pending
        return out

    def frames(self) -> list[Frame]:
        """Every frame but the commit frames (checkpoints included), in order."""
        return [f for it in self.items for f in (it.frames if isinstance(it, Txn) else [it])]

    def build(self, superblock=None, fix_history: bool = True) -> bytes:
        """The file, every hash recomputed. The superblock names the last checkpoint;
        `superblock(sb) -> sb` may change it (its CRC is recomputed too). With
        `fix_history`, a checkpoint's history gets the re-sealed chain hashes (and
        commit times), so it still loads after an edit before it (without, open
        falls back to replay and meets the edit) and verify finds it the log's."""
        out = bytearray(F.LOG_START)
        out[:F.HEADER_SIZE] = self.head
        file_id = self.head[16:32]
        chain, version, sb = F.genesis_chain(file_id), 0, None

        def put(kind: int, payload: bytes) -> bytes:
            digest = F.frame_hash(kind, len(payload), [payload])
            out.extend(F.pack_frame_header(kind, len(payload), digest) + payload)
            out.extend(bytes(F.pad(len(out)) - len(out)))
            return digest

        chains, times = [], []
        for it in self.items:
            if isinstance(it, Frame):
                offset = len(out)
                put(it.kind, _with_history(it.payload, chains, times) if fix_history
                    else it.payload)
                sb = F.Superblock(1, offset, version, len(out), chain)
                continue
            digest = hashlib.sha256(b"".join(put(f.kind, f.payload) for f in it.frames)).digest()
            version += 1
            new_chain = F.chain_hash(chain, digest, version, it.timestamp_us)
            put(F.Kind.COMMIT, F.pack_commit(F.CommitRecord(
                version, it.timestamp_us, len(it.frames), it.rows_changed, digest, chain,
                new_chain)))
            chain = new_chain
            chains.append(chain)
            times.append(it.timestamp_us)
        if superblock is not None and sb is not None:
            sb = superblock(sb)
        if sb is not None:
            at = F.SLOT_OFFSETS[sb.seq % 2]
            out[at:at + F.SLOT_SIZE] = F.pack_slot(sb)
        return bytes(out)


def _with_history(payload: bytes, chains: list[bytes], times: list[int]) -> bytes:
    """A checkpoint payload whose history's chain hashes and times are the re-sealed
    log's, so an edit before a checkpoint does not stop its load at the first check."""
    try:
        meta, blobs = unpack_record(payload)
        i = array_index(meta, "h.chain")
    except Exception:   # a crafted checkpoint: leave it as it is
        return payload
    if len(blobs[i]) != 32 * len(chains):
        return payload
    blobs[i] = b"".join(chains)
    blobs[array_index(meta, "h.ts")] = np.array(times, np.int64).tobytes()
    return pack_record(meta, blobs)


def unpack_record(payload: bytes) -> tuple[dict, list[bytes]]:
    """(meta including '_arrays', the raw bytes of each array) of a record payload;
    a compressed one (checkpoints) comes back uncompressed, as pack_record writes it."""
    (mlen,) = struct.unpack_from("<I", payload, 0)
    if mlen & record.PACKED_META or any(len(a) == 4 for a in _specs(payload, mlen)):
        meta, arrays, _ = record.decode(payload)
        meta["_arrays"] = [[n, a.dtype.str, list(a.shape)] for n, a in arrays.items()]
        return meta, [a.tobytes() for a in arrays.values()]
    meta = msgspec.msgpack.decode(payload[4:4 + mlen])
    blobs, pos = [], F.pad(4 + mlen)
    for _name, dtype, shape in meta["_arrays"]:
        nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        blobs.append(payload[pos:pos + nbytes])
        pos = F.pad(pos + nbytes)
    return meta, blobs


def _specs(payload: bytes, mlen: int) -> list:
    if mlen & record.PACKED_META:
        return []
    return msgspec.msgpack.decode(payload[4:4 + mlen]).get("_arrays", [])


def pack_record(meta: dict, blobs: list[bytes], meta_length: int | None = None) -> bytes:
    """A record payload from a meta (with its '_arrays', trusted as given) and blobs."""
    head = msgspec.msgpack.encode(meta)
    mlen = len(head) if meta_length is None else meta_length
    out = bytearray((struct.pack("<I", mlen & 0xFFFFFFFF) + head).ljust(F.pad(4 + len(head)),
                                                                         b"\0"))
    for b in blobs:
        out.extend(b)
        out.extend(bytes(F.pad(len(out)) - len(out)))
    return bytes(out)


def edit_record(frame: Frame, edit) -> Frame:
    """The frame with `edit(meta, blobs)` applied to its record (in place)."""
    meta, blobs = unpack_record(frame.payload)
    edit(meta, blobs)
    return Frame(frame.kind, pack_record(meta, blobs))


def array_index(meta: dict, name: str) -> int:
    return next(i for i, a in enumerate(meta["_arrays"]) if a[0] == name)


# ---- the valid file -----------------------------------------------------------------

DOCS = {"tag": vv.Int(index="hash"), "title": vv.Text(index="hash"), "meta": "json",
        "at": vv.Timestamp(index="sorted"), "score": vv.Float(index="sorted"),
        "flag": vv.Bool(), "emb": vv.Vector(8, metric="l2", index=vv.HNSW(m=4,
                                                                          ef_construction=16,
                                                                          ef_search=16))}
NOTES = {"id": "text", "body": vv.Text(fts=True), "v": vv.Vector(4, dtype="f16")}


def build_valid(path: str) -> None:
    """Two collections, every field kind, a graph, a checkpoint, commits after it."""
    rng = np.random.default_rng(7)
    d = vv.connect(path)
    docs = d.create_collection("docs", DOCS)
    notes = d.create_collection("notes", NOTES)
    docs.insert([{"id": i, "tag": i % 3, "title": f"t{i % 4}", "meta": {"i": i, "l": [i, "x"]},
                  "at": f"2024-01-0{1 + i % 9}T00:00:00", "score": i / 3, "flag": i % 2 == 0,
                  "emb": rng.normal(size=8).tolist()} for i in range(12)])
    docs.insert_arrays(id=np.arange(100, 140), tag=np.arange(40) % 5,
                       emb=rng.normal(size=(40, 8)).astype(np.float32))
    notes.insert([{"id": f"n{i}", "body": f"note {i} about things",
                   "v": rng.normal(size=4).tolist() if i % 3 else None} for i in range(10)])
    docs.update({"title": "changed"}, where="tag = 1")
    docs.delete(ids=[3, 101])
    notes.create_index("v", vv.HNSW(m=3, ef_construction=8, ef_search=8))
    d.checkpoint()
    with d.transaction():
        docs.upsert([{"id": 5, "tag": 9, "meta": [1, 2]}, {"id": 200, "score": 1.5}])
        notes.delete(ids=["n2"])
    notes.insert({"id": "late", "body": "after the checkpoint", "v": [1, 2, 3, 4]})
    docs.insert_arrays(id=[300, 301], tag=[7, 8], emb=np.ones((2, 8), np.float32))
    d.close()


@pytest.fixture(scope="module")
def valid(tmp_path_factory) -> bytes:
    """The file, re-sealed without the checkpoint close() wrote: so one checkpoint,
    then three commits to replay after it. File id and commit times are fixed, so
    the same seed crafts the same files on every run."""
    path = str(tmp_path_factory.mktemp("crafted") / "valid.varve")
    build_valid(path)
    with open(path, "rb") as f:
        layout = Layout.parse(f.read())
    while isinstance(layout.items[-1], Frame):
        layout.items.pop()
    layout.head = F.pack_header(bytes(range(16)), 1_700_000_000_000_000)
    for k, it in enumerate(x for x in layout.items if isinstance(x, Txn)):
        it.timestamp_us = 1_700_000_000_000_000 + k
    return layout.build()


def write(tmp_path, raw: bytes, name: str = "crafted.varve") -> str:
    path = str(tmp_path / name)
    with open(path, "wb") as f:
        f.write(raw)
    return path


def test_resealed_file_is_the_same_file(valid, tmp_path):
    layout = Layout.parse(valid)
    assert sum(isinstance(it, Frame) for it in layout.items) == 1
    kinds = Counter(f.kind for f in layout.frames())
    assert kinds[F.Kind.INSERT] and kinds[F.Kind.DELETE] and kinds[F.Kind.CREATE_INDEX]
    path = write(tmp_path, layout.build())
    assert vv.verify_file(path).ok
    d = vv.connect(path, readonly=True)
    try:
        assert d.engine.log.file.superblock.checkpoint_offset      # opened from the checkpoint
        assert d["docs"].count() == 12 + 40 - 2 + 1 + 2 and d["notes"].count() == 10
        assert len(d["docs"].search([0] * 8, limit=3)) == 3
    finally:
        d.close()


# ---- crafting ---------------------------------------------------------------------------

DEEP = "__DEEP__"   # a placeholder value: its msgpack bytes become a deeply nested list
ADVERSARIAL = [None, True, False, 0, -1, 1, 2, 7, 2**31, 2**32, 2**40, 10**9, 2**63 - 1,
               -(2**63), 2**64 - 1, 1.5, float("nan"), "", "x", "docs", "emb", "v", "id",
               [], [0], [-1], [1, 2, 3], [2**40], {}, {"a": 1}, {"kind": "hnsw"}, b"\0",
               DEEP, [None] * 40, list(range(70)), [[0, 5, 4096]], [[0, 2**40, 4096]]]
SHAPES = [[2**40], [2**62, 2**62], [], [0], [1], [3, 2**61], [2**64 - 1], [-1], [5, -5],
          [1] * 40, "3", [1.5], None]
DTYPES = ["|O", "<U4", ">i8", "<c8", "V8", "S4", "<M8[us]", "<f4", "<i8", "|b1", "<i4",
          "<f2", "|i1", "bogus", "", 7, None]
META_LENGTHS = [0, 1, 3, 2**31, 2**32 - 1]
ARRAY_VALUES = [-(2**63), -(2**31), -2, -1, 0, 1, 2, 3, 31, 64, 127, 255, 4096, 2**31 - 1,
                2**40, 2**63 - 1]


def pick(rng, options):
    """One of the options (rng.choice would turn big ints into floats)."""
    options = list(options)
    return options[int(rng.integers(len(options)))]


def _paths(x, path=(), depth=0):
    """Paths to the values inside a meta (a few list elements each, four levels deep)."""
    if depth > 4:
        return
    items = x.items() if isinstance(x, dict) else enumerate(x[:4]) if isinstance(x, list) \
        else ()
    for k, v in items:
        yield path + (k,)
        yield from _paths(v, path + (k,), depth + 1)


def _get(meta, path):
    for k in path[:-1]:
        meta = meta[k]
    return meta


def _pack_deep(meta: dict, blobs: list[bytes], depth: int) -> bytes:
    payload = bytearray(pack_record(meta, blobs))
    token = msgspec.msgpack.encode(DEEP)
    head_end = 4 + struct.unpack_from("<I", payload, 0)[0]
    head = bytes(payload[4:head_end]).replace(token, b"\x91" * depth + b"\xc0", 1)
    return pack_record_raw(head, blobs)


def pack_record_raw(head: bytes, blobs: list[bytes]) -> bytes:
    out = bytearray((struct.pack("<I", len(head)) + head).ljust(F.pad(4 + len(head)), b"\0"))
    for b in blobs:
        out.extend(b)
        out.extend(bytes(F.pad(len(out)) - len(out)))
    return bytes(out)


def mutate_record(rng, frame: Frame) -> tuple[str, Frame]:
    """One hostile edit of a record's meta, array list, meta length or array contents."""
    try:
        meta, blobs = unpack_record(frame.payload)
    except Exception:   # already crafted beyond decoding (a second edit): the bytes then
        body = bytearray(frame.payload)
        body[int(rng.integers(len(body)))] = int(rng.integers(256))
        return "random byte", Frame(frame.kind, bytes(body))
    how = pick(rng, ["value", "value", "delete", "int", "int", "shape", "dtype", "rename",
                      "meta_length", "contents", "contents", "deep"])
    specs = meta["_arrays"]
    if how in ("shape", "dtype", "rename", "contents") and not specs:
        how = "value"
    if how in ("value", "delete", "int", "deep"):
        paths = [p for p in _paths(meta) if p[0] != "_arrays"]
        ints = [p for p in paths if type(_get(meta, p)[p[-1]]) is int]
        pool = ints if how == "int" and ints else paths
        if not pool:
            return "empty meta", frame
        path = pool[int(rng.integers(len(pool)))]
        parent = _get(meta, path)
        if how == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif how == "int" and type(parent[path[-1]]) is int:
            v = parent[path[-1]]
            parent[path[-1]] = pick(rng, [v + 1, v - 1, -v - 1, 2 * v + 7, v + 2**32])
        elif how == "deep":
            parent[path[-1]] = DEEP
            depth = pick(rng, [200, 950, 5_000, 200_000])
            return f"deep {depth} at {path}", Frame(frame.kind, _pack_deep(meta, blobs, depth))
        else:
            parent[path[-1]] = copy.deepcopy(ADVERSARIAL[int(rng.integers(len(ADVERSARIAL)))])
        return f"{how} at {path}", Frame(frame.kind, pack_record(meta, blobs))
    if how == "meta_length":
        mlen = len(msgspec.msgpack.encode(meta))
        choice = META_LENGTHS + [mlen - 1, mlen + 1, len(frame.payload)]
        return "meta_length", Frame(frame.kind, pack_record(meta, blobs,
                                                            pick(rng, choice)))
    i = int(rng.integers(len(specs)))
    if how == "shape":
        specs[i][2] = copy.deepcopy(SHAPES[int(rng.integers(len(SHAPES)))])
    elif how == "dtype":
        specs[i][1] = DTYPES[int(rng.integers(len(DTYPES)))]
    elif how == "rename":
        specs[i][0] = specs[int(rng.integers(len(specs)))][0] if rng.random() < 0.5 else "zz"
    elif how == "contents":
        blob = bytearray(blobs[i])
        item = np.dtype(specs[i][1]).itemsize
        if len(blob) >= item:
            for _ in range(int(rng.integers(1, 4))):
                at = int(rng.integers(len(blob) // item)) * item
                v = pick(rng, ARRAY_VALUES) % (1 << (8 * item))
                blob[at:at + item] = v.to_bytes(item, "little")
        blobs[i] = bytes(blob)
    return f"{how} of array {specs[i][0]!r}", Frame(frame.kind, pack_record(meta, blobs))


def craft(rng, layout: Layout, raw: bytes) -> tuple[str, bytes]:
    """One crafted file: a description and its bytes (re-sealed unless 'raw')."""
    what, data = _craft(rng, copy.deepcopy(layout), raw)
    if rng.random() < 0.1 and what.startswith(("record", "bytes")):   # and a second edit
        more, data = _craft(rng, Layout.parse(data), data)
        what = f"{what}; then {more}"
    return what, data


def _craft(rng, lay: Layout, raw: bytes) -> tuple[str, bytes]:
    fix = bool(rng.random() < 0.5)
    records = [(i, j) for i, it in enumerate(lay.items)
               for j in (range(len(it.frames)) if isinstance(it, Txn) else [None])]
    how = pick(rng, ["record"] * 8 + ["bytes", "bytes", "superblock", "structure", "raw"])
    if how == "record" or how == "bytes":
        # a third of them at the checkpoint: it holds the most structure
        ck = [r for r in records if r[1] is None]
        i, j = pick(rng, ck if rng.random() < 0.35 else records)
        frame = lay.items[i] if j is None else lay.items[i].frames[j]
        if how == "record":
            what, frame = mutate_record(rng, frame)
        else:
            body = bytearray(frame.payload)
            for _ in range(int(rng.integers(1, 5))):
                body[int(rng.integers(len(body)))] = int(rng.integers(256))
            what, frame = "random bytes", Frame(frame.kind, bytes(body))
        if j is None:
            lay.items[i] = frame
        else:
            lay.items[i].frames[j] = frame
        return f"{how} in frame {i}.{j} (kind {frame.kind}): {what}", lay.build(None, fix)
    if how == "superblock":
        size = len(raw)
        key = pick(rng, ["checkpoint_offset", "log_end", "checkpoint_version", "chain", "seq"])
        value = {
            "checkpoint_offset": pick(rng, [F.LOG_START, F.pad(int(rng.integers(size))),
                                            int(rng.integers(size)), size, size + 64,
                                            2**63, 2**64 - 1]),
            "log_end": pick(rng, [F.LOG_START, F.pad(int(rng.integers(size))), size,
                                  2**40, 0]),
            "checkpoint_version": pick(rng, [0, 1, 3, 4, 100, 2**63]),
            "chain": bytes(rng.integers(0, 256, 32, dtype=np.uint8)),
            "seq": pick(rng, [0, 2, 2**64 - 1]),
        }[key]
        return f"superblock {key}={value if key != 'chain' else '..'}", \
            lay.build(lambda sb: replace(sb, **{key: value}))
    if how == "structure":
        txns = [i for i, it in enumerate(lay.items) if isinstance(it, Txn) and it.frames]
        i = txns[int(rng.integers(len(txns)))]
        frames = lay.items[i].frames
        j = int(rng.integers(len(frames)))
        op = pick(rng, ["drop", "dup", "kind", "move", "drop_txn", "dup_txn", "checkpoint_first",
                        "timestamp"])
        if op == "timestamp":
            lay.items[i].timestamp_us = pick(rng, [-(2**63), -1, 0, 2**62, 2**63 - 1])
        elif op == "drop":
            del frames[j]
        elif op == "dup":
            frames.insert(j, copy.deepcopy(frames[j]))
        elif op == "kind":
            frames[j] = Frame(pick(rng, [0, 1, 2, 10, 11, 12, 13, 14, 99]), frames[j].payload)
        elif op == "move":
            k = txns[int(rng.integers(len(txns)))]
            lay.items[k].frames.append(frames.pop(j))
        elif op == "drop_txn":
            del lay.items[i]
        elif op == "dup_txn":
            lay.items.insert(i, copy.deepcopy(lay.items[i]))
        else:
            ck = next(k for k, it in enumerate(lay.items) if isinstance(it, Frame))
            lay.items.insert(0, lay.items.pop(ck))
        return f"structure: {op} frame {i}.{j}", lay.build(None, fix)
    out = bytearray(raw)
    for _ in range(int(rng.integers(1, 4))):
        out[int(rng.integers(len(out)))] ^= 1 << int(rng.integers(8))
    return "raw bit flips (not re-sealed)", bytes(out)


# ---- opening crafted files in a child under an address-space limit -----------------------

# The child opens a valid file first (numba compiles or loads its kernels and starts
# its threads), takes its peak address space, and only then limits it to
# `max(floor, peak + headroom)`: an allocation sized by a crafted frame (the 22 GiB
# one of a 200-byte insert) fails there as MemoryError, which the tally catches.
CHILD = textwrap.dedent(r"""
    import json, os, resource, sys, traceback
    import numpy as np
    import varvedb as vv
    import varvedb.engine.checkpoint as ck
    from varvedb.errors import CorruptFileError, VarveError
    from varvedb.storage import verify as storage_verify

    def describe(e):
        # the class, and what a CorruptFileError was made from (replay's backstop)
        name, seen = type(e).__name__, set()
        cause = e.__cause__
        while cause is not None and id(cause) not in seen:
            seen.add(id(cause))
            if not isinstance(cause, CorruptFileError):
                name += "<" + type(cause).__name__
            cause = cause.__cause__
        return name if isinstance(e, VarveError) else "!" + name

    notes = []
    _load = ck.load
    def load(*a, **k):      # a failed checkpoint load is swallowed by open: note it
        try:
            return _load(*a, **k)
        except BaseException as e:
            notes.append("checkpoint:" + describe(e) + (" " + str(e)[:200] if VERBOSE else ""))
            raise
    ck.load = load

    def use(path, readonly):
        d = vv.connect(path, readonly=readonly)
        try:
            d.history()
            for name in d.collections():
                c = d[name]
                c.count()
                c.find(limit=5)
                for f in c.table.schema.vector_fields:
                    q = np.ones(c.table.schema.fields[f].dim)
                    c.search(q, field=f, limit=3)
                    c.search(q, field=f, limit=3, where="id != 'x'" if
                             c.table.schema.id_kind == "text" else "id != 3")
        finally:
            d.close()

    def peak():
        for line in open("/proc/self/status"):
            if line.startswith("VmPeak"):
                return int(line.split()[1]) * 1024

    warm, todo, floor, headroom = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    VERBOSE = os.environ.get("CRAFTED_VERBOSE") == "1"
    use(warm, True)
    use(warm, False)
    limit = max(floor, peak() + headroom)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    print(json.dumps({"limit": limit}), flush=True)
    for i, path in json.load(open(todo)):
        print(json.dumps({"start": i}), flush=True)
        out = []
        for step, fn in (("ro", lambda: use(path, True)),
                         ("hashes", lambda: "ok" if storage_verify.verify_file(path).ok
                          else "damage"),
                         ("verify", lambda: "ok" if vv.verify_file(path).ok else "damage"),
                         ("rw", lambda: use(path, False))):
            notes.clear()
            try:
                res = fn() or "ok"
            except BaseException as e:
                res = describe(e)
                if res.startswith("!") or "<" in res or VERBOSE:
                    res += " " + "".join(traceback.format_exception_only(e)).strip()[:300]
            out += [step + ":" + n for n in notes] + [step + ":" + res]
        print(json.dumps({"done": i, "out": out}), flush=True)
""")

ADDRESS_FLOOR = 3 << 30      # ~3 GiB: far below what the crafted sizes ask
ADDRESS_HEADROOM = 1 << 30   # above a normal open's peak (numba, threads, arenas)


_FORKER: Forker | None = None


def children() -> Forker:
    """The forker this file's children are forked from (tests/forker.py), started
    at its first use with their environment: a fresh `python -c CHILD` spent ~1 s
    of CPU importing numpy, numba and varvedb and loading kernels, once for each
    of the ~15 tests that open a crafted file in a child. Each child is still a
    process of its own that opens a valid file first and then limits its own
    address space (the forker's imports are in its peak, as a fresh child's are)."""
    global _FORKER
    if _FORKER is None:
        env = child_env()
        env["MALLOC_ARENA_MAX"] = "2"   # threads' malloc arenas are address space too
        # one numba thread: a crafted file that loses its graph has it rebuilt, and on
        # a busy machine each parallel launch of a tiny batch costs ~10 ms of wake-ups
        env["NUMBA_NUM_THREADS"] = "1"
        _FORKER = Forker(env=env)
        atexit.register(_FORKER.close)
    return _FORKER


def open_in_children(warm: str, files: list[tuple[int, str]], workers: int = 2,
                     timeout: float = 600, floor: int = ADDRESS_FLOOR,
                     headroom: int = ADDRESS_HEADROOM) -> tuple[dict, list[str]]:
    """{file index: outcomes} for each file, opened in `workers` children; plus problems
    (a child killed by a signal or timed out, naming the file it was on). The timeout
    is a hang guard: a fresh clone's suite at load 15 took a child past 60 s."""
    procs = []
    for k in range(workers):
        todo, mine = f"{warm}.todo{k}.json", f"{warm}.warm{k}"
        with open(todo, "w") as f:
            json.dump(files[k::workers], f)
        shutil.copyfile(warm, mine)   # each child opens its own copy for writing
        out, err = f"{warm}.out{k}", f"{warm}.err{k}"
        procs.append((children().popen(CHILD, mine, todo, floor, headroom, stdout_path=out,
                                       stderr_path=err), out, err))
    results, problems = {}, []
    for p, out_path, err_path in procs:
        try:
            p.wait(timeout)
            why = None if p.returncode == 0 else f"exit status {p.returncode}"
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(600)
            why = f"timed out after {timeout} s"
        p.stdout.close()
        p.stderr.close()
        with open(out_path) as f:
            out = f.read()
        with open(err_path, errors="replace") as f:
            err = f.read()
        started = None
        for line in out.splitlines():
            msg = json.loads(line)
            if "start" in msg:
                started = msg["start"]
            elif "done" in msg:
                results[msg["done"]] = msg["out"]
                started = None
        if why:
            problems.append(f"child {why} on file {started}: {err[-2000:]}")
    return results, problems


def tally_of(results: dict) -> Counter:
    """Outcomes counted by step and exception class ('ro:CorruptFileError', ...)."""
    return Counter(o.split(" ")[0] for outs in results.values() for o in outs)


def bad_outcomes(results: dict, what: dict) -> list[str]:
    """Outcomes that are not success or a VarveError built by a check: another
    exception ('!'), or a CorruptFileError made from one by a backstop ('<')."""
    return [f"file {i} ({what.get(i, '')}): {o}" for i, outs in sorted(results.items())
            for o in outs
            if o.startswith(("ro:!", "rw:!", "hashes:!", "verify:!")) or "<" in o.split(" ")[0]]


# CI crafts 400 files (~9 s of CPU, its children included; 1000: ~18 s); `make
# soak` (VARVEDB_SOAK=1) crafts 3000. The same seed: CI's files are soak's first 400.
FUZZ_FILES = 3000 if os.environ.get("VARVEDB_SOAK") else 400


@pytest.fixture
def scratch(tmp_path):
    """A directory for many small files: tmpfs when there is one. This test is about
    decoding, not durability, and a writer's open and close of each crafted file
    (cut tail, checkpoint) would otherwise cost it several fsyncs."""
    if not os.path.isdir("/dev/shm"):
        yield tmp_path
        return
    import tempfile
    from pathlib import Path
    d = tempfile.mkdtemp(prefix="varvedb-crafted-", dir="/dev/shm")
    try:
        yield Path(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_fuzz_crafted_files_raise_varve_errors_only(valid, scratch):
    rng = np.random.default_rng(20240611)
    layout = Layout.parse(valid)
    warm = write(scratch, valid, "valid.varve")
    files, what = [], {}
    for i in range(FUZZ_FILES):
        what[i], data = craft(rng, layout, valid)
        files.append((i, write(scratch, data, f"{i}.varve")))
    results, problems = open_in_children(warm, files)
    tally = tally_of(results)
    kinds = Counter(w.split(":")[0].split(" in ")[0].split("=")[0] for w in what.values())
    print(f"\ncrafted files tried: {len(files)} ({dict(kinds)})")
    for key, count in sorted(tally.items()):
        print(f"  {key:40s} {count}")
    bad = bad_outcomes(results, what)
    print(f"  not a VarveError built by a check: {len(bad)}; children lost: {problems}")
    assert not problems, problems
    assert len(results) == len(files)
    assert not bad, "\n".join(bad[:20])
    # each way of crafting is tried, and the fuzz reaches past the hashes: most
    # files fail a check, not the hashes
    assert {"record", "bytes", "superblock", "structure", "raw"} <= {
        w.split(" ")[0].rstrip(":") for w in what.values()}, dict(kinds)
    assert tally["hashes:ok"] > 0.8 * len(files)
    assert tally["ro:CorruptFileError"] > 0.1 * len(files) and tally["ro:ok"] > 0


# ---- regressions: each failed on the code before the checks -------------------------------

def frame_of(layout: Layout, kind: int, which: int = 0) -> tuple[int, int]:
    """(item, frame) position of the `which`-th frame of this kind."""
    found = [(i, j) for i, it in enumerate(layout.items) if isinstance(it, Txn)
             for j, f in enumerate(it.frames) if f.kind == kind]
    return found[which]


def edited(valid: bytes, kind: int, edit, which: int = 0) -> bytes:
    """The valid file without its checkpoint (so open replays every frame) and with
    one record edited, re-sealed."""
    layout = Layout.parse(valid)
    layout.items = [it for it in layout.items if isinstance(it, Txn)]
    i, j = frame_of(layout, kind, which)
    layout.items[i].frames[j] = edit_record(layout.items[i].frames[j], edit)
    return layout.build()


def open_raises_corrupt(path: str, match: str) -> None:
    for readonly in (True, False):
        with pytest.raises(CorruptFileError, match=match):
            vv.connect(path, readonly=readonly)


def open_in_child(tmp_path, valid: bytes, data: bytes, **limits) -> list[str]:
    warm = write(tmp_path, valid, "valid.varve")
    results, problems = open_in_children(warm, [(0, write(tmp_path, data))], workers=1,
                                         **limits)
    assert not problems, problems
    return results[0]


def test_insert_of_a_billion_rows_in_a_small_frame_is_refused_in_bounded_memory(valid,
                                                                                 tmp_path):
    def edit(meta, blobs):
        meta["n"] = 10**9       # np.full(10**9) per column before the checks: 8 GB and more
    data = edited(valid, F.Kind.INSERT, edit)
    outs = open_in_child(tmp_path, valid, data)
    assert outs == ["ro:CorruptFileError", "hashes:ok", "verify:ok",
                    "rw:CorruptFileError"], outs
    open_raises_corrupt(write(tmp_path, data), "expected <i8 \\(1000000000,\\)")


def test_insert_starting_a_row_late_is_corrupt_not_an_assertion(valid, tmp_path):
    def edit(meta, blobs):
        meta["first"] += 1
    path = write(tmp_path, edited(valid, F.Kind.INSERT, edit, which=1))
    open_raises_corrupt(path, r"offset \d+ \(version \d+\).*starts at row 13; the "
                              "collection has 12")


def test_array_shape_past_its_buffer_is_corrupt(valid, tmp_path):
    def edit(meta, blobs):
        meta["_arrays"][array_index(meta, "ids")][2] = [2**40]
    path = write(tmp_path, edited(valid, F.Kind.INSERT, edit))
    open_raises_corrupt(path, "lies past the end")


def test_deeply_nested_meta_is_corrupt(valid, tmp_path):
    layout = Layout.parse(valid)
    layout.items = [it for it in layout.items if isinstance(it, Txn)]
    i, j = frame_of(layout, F.Kind.DELETE)
    meta, blobs = unpack_record(layout.items[i].frames[j].payload)
    meta["c"] = DEEP
    layout.items[i].frames[j] = Frame(F.Kind.DELETE, _pack_deep(meta, blobs, 100_000))
    path = write(tmp_path, layout.build())
    open_raises_corrupt(path, "does not decode: maximum recursion depth")


def test_create_index_with_m_of_1e8_is_refused(valid, tmp_path):
    def edit(meta, blobs):
        meta["spec"]["m"] = 10**8   # links of 800 MB per node before the checks
    data = edited(valid, F.Kind.CREATE_INDEX, edit)
    outs = open_in_child(tmp_path, valid, data)
    assert outs == ["ro:CorruptFileError", "hashes:ok", "verify:ok",
                    "rw:CorruptFileError"], outs
    open_raises_corrupt(write(tmp_path, data), r"HNSW m must be an integer in 2\.\.100")


def state(path: str) -> dict:
    d = vv.connect(path, readonly=True)
    try:
        out = {"version": d.version}
        for name in d.collections():
            c = d[name]
            out[name] = [{k: (v.tolist() if isinstance(v, np.ndarray) else v)
                          for k, v in x.to_dict().items()} for x in c.find()]
            for f in c.table.schema.vector_fields:
                s = c.search(np.ones(c.table.schema.fields[f].dim), field=f, limit=5,
                             exact=True)
                out[f"{name}.{f}"] = (s.ids, s.scores.tolist())
        return out
    finally:
        d.close()


def edited_checkpoint(valid: bytes, edit) -> bytes:
    layout = Layout.parse(valid)
    k = next(k for k, it in enumerate(layout.items) if isinstance(it, Frame))
    layout.items[k] = edit_record(layout.items[k], edit)
    return layout.build()


@pytest.mark.parametrize("case", ["extents past the end", "extent unaligned",
                                  "extents short of n", "second table's n", "history order"])
def test_checkpoint_that_does_not_fit_is_a_lost_shortcut(valid, tmp_path, case):
    """The log is intact: open skips the checkpoint, replays, and sees the same state
    (and nothing of the half-loaded checkpoint stays behind)."""
    def edit(meta, blobs):
        docs = meta["tables"][0]
        if case == "extents past the end":
            for e in docs["extents"]["emb"]:
                e[2] += 2**40
        elif case == "extent unaligned":
            docs["extents"]["emb"][0][2] += 4
        elif case == "extents short of n":
            docs["extents"]["emb"][-1][1] -= 1
        elif case == "second table's n":
            meta["tables"][1]["n"] += 1
        else:
            i = array_index(meta, "h.version")
            blobs[i] = np.frombuffer(blobs[i], np.int64)[::-1].tobytes()
    good = write(tmp_path, valid, "good.varve")
    path = write(tmp_path, edited_checkpoint(valid, edit))
    assert state(path) == state(good)
    # the load itself: CorruptFileError (which open catches); the good one loads
    from varvedb.engine import checkpoint
    for p, ok in ((path, False), (good, True)):
        with open(p, "rb") as f:
            raw = f.read()
        sb = F.unpack_slot(raw[F.SLOT_OFFSETS[1]:F.SLOT_OFFSETS[1] + F.SLOT_SIZE])
        if ok:
            loaded = checkpoint.load(memoryview(raw), sb.checkpoint_offset, sb)
            assert loaded.version == sb.checkpoint_version and "docs" in loaded.names
            assert loaded.history[-1].version == sb.checkpoint_version
        else:
            with pytest.raises(CorruptFileError):
                checkpoint.load(memoryview(raw), sb.checkpoint_offset, sb)
    d = vv.connect(path)     # a writer too, and its next checkpoint is good again
    d["docs"].insert({"id": 999, "tag": 1})
    d.checkpoint()
    d.close()
    assert len(state(path)["docs"]) == len(state(good)["docs"]) + 1


@pytest.mark.parametrize("deaths", [[[0]], [{}], [[[[0]]]]], ids=["list", "map", "nested"])
def test_a_checkpoints_deaths_that_name_no_branch_id_are_refused_by_the_check(valid, tmp_path,
                                                                             deaths):
    """A checkpoint table's `deaths` lists the branches whose deaths it holds. An
    item that is no id (a list, a map) was looked up in the branch catalog's dict
    as it was: TypeError (unhashable), which load's backstop made a CorruptFileError
    (the fuzz at `make soak`'s 3000 files found it, a list nested 200 deep). The
    check refuses it itself; open skips the checkpoint and replays the log."""
    def edit(meta, blobs):
        meta["tables"][0]["deaths"] = deaths
    good = write(tmp_path, valid, "good.varve")
    path = write(tmp_path, edited_checkpoint(valid, edit))
    from varvedb.engine import checkpoint
    with open(path, "rb") as f:
        raw = f.read()
    sb = F.unpack_slot(raw[F.SLOT_OFFSETS[1]:F.SLOT_OFFSETS[1] + F.SLOT_SIZE])
    with pytest.raises(CorruptFileError, match="deaths of unknown branches") as e:
        checkpoint.load(memoryview(raw), sb.checkpoint_offset, sb)
    assert e.value.__cause__ is None
    assert state(path) == state(good)


@pytest.mark.parametrize("case", ["link out of range", "level too high", "twin ring",
                                  "links0 shape", "params extent", "params m", "watermark"])
def test_crafted_graph_in_a_checkpoint_is_rebuilt(valid, tmp_path, case):
    """Arrays that do not fit their sizes are refused at open; the rest (links,
    levels, twin rings: a ring that never comes back to its row kept the walk's
    twin loop turning) at the graph's first use, before a kernel reads it."""
    def edit(meta, blobs):
        q = "1.vx.emb."
        def arr(name, dtype):
            i = array_index(meta, q + name)
            return i, np.frombuffer(blobs[i], dtype).copy()
        if case == "link out of range":
            i, a = arr("g.links0", np.int32)
            a[5] = 10**6
        elif case == "level too high":
            i, a = arr("g.levels", np.int8)
            a[0] = 100
        elif case == "twin ring":
            i, a = arr("g.twins", np.int32)
            a[:3] = [1, 2, 1]           # 0 -> 1 -> 2 -> 1 -> 2 ...
        elif case == "links0 shape":
            i = array_index(meta, q + "g.links0")
            meta["_arrays"][i][2] = [meta["_arrays"][i][2][0] - 1, 8]
            return
        elif case in ("params extent", "params m"):
            i, a = arr("g.params", np.int64)
            a[10 if case == "params extent" else 3] = 2**40
        else:
            i, a = arr("linked", np.int64)
            a[0] = 10**9
        blobs[i] = a.tobytes()
    good = write(tmp_path, valid, "good.varve")
    path = write(tmp_path, edited_checkpoint(valid, edit))
    sized = case in ("link out of range", "level too high", "twin ring")
    d = vv.connect(path, readonly=True)
    try:
        vi = d["docs"].table.vector_indexes["emb"]
        if sized:   # open left the graph as the file has it, to be checked at first use
            assert vi.unchecked is not None and len(vi.graph) > 0 and vi.checkpointed > 0
        else:       # refused at open
            assert vi.unchecked is None and vi.linked == 0 and len(vi.graph) == 0
        with vv.connect(good, readonly=True) as g:
            want = g["docs"].search(np.ones(8), limit=5).ids
        assert d["docs"].search(np.ones(8), limit=5).ids == want    # (an exact scan)
    finally:
        d.close()
    assert state(path) == state(good)
    d = vv.connect(path)     # a writer checks and links the graph again (in the background)
    try:
        assert d["docs"].wait_indexed(timeout=1800)     # a hang guard only
        vi = d["docs"].table.vector_indexes["emb"]
        # rebuilt: none of it is the checkpoint's any more
        assert vi.unchecked is None and vi.checkpointed == 0 and len(vi.graph) > 0
    finally:
        d.close()


@pytest.mark.parametrize("case", ["int value", "text word", "json value", "deleted row alive",
                                  "vector norm", "history rows"])
def test_a_resealed_checkpoint_that_is_not_the_logs_state_breaks_verify(valid, tmp_path,
                                                                         case):
    """A checkpoint's own hash is no proof: anyone can recompute it. verify replays
    the log to the checkpoint's version and compares the state: an edit is reported
    at the checkpoint (its version + 1; the versions before it intact), with or
    without an anchor taken before the edit, by the CLI too (issue F08)."""
    def edit(meta, blobs):
        def arr(name, dtype):
            i = array_index(meta, name)
            return i, np.frombuffer(blobs[i], dtype).copy()
        i = None
        if case == "int value":
            i, a = arr("1.tag.values", np.int64)
            a[0] += 1
        elif case == "text word":
            meta["tables"][0]["columns"]["title"][0] = "forged"
        elif case == "json value":
            meta["tables"][0]["columns"]["meta"][0] = {"i": 999}
        elif case == "deleted row alive":
            i, a = arr("1.died", np.int64)
            a[3] = np.iinfo(np.int64).max
        elif case == "vector norm":
            i, a = arr("2.v.norms", np.float32)
            a[1] *= 2
        else:
            i, a = arr("h.rows", np.int64)
            a[0] += 1
        if i is not None:
            blobs[i] = a.tobytes()
    good = write(tmp_path, valid, "good.varve")
    path = write(tmp_path, edited_checkpoint(valid, edit))
    d = vv.connect(good, readonly=True)
    sb = d.engine.log.file.superblock
    anchor = next((h.version, h.chain) for h in d.history() if h.version == sb.checkpoint_version)
    d.close()
    assert vv.verify_file(good).ok and vv.verify_file(good, anchor=anchor).ok
    for rep in (vv.verify_file(path), vv.verify_file(path, anchor=anchor)):
        assert not rep.ok and rep.first_break.offset == sb.checkpoint_offset, rep
        assert "does not hold the log's state" in rep.first_break.reason
        assert rep.first_break.version == sb.checkpoint_version + 1
        assert rep.versions_checked == sb.checkpoint_version
    out = subprocess.run([PYTHON, "-m", "varvedb", "verify", path], capture_output=True,
                         text=True, env=child_env())
    assert out.returncode == 1 and "does not hold the log's state" in out.stderr, out


# A graph walked (more rows than the planner's EXACT_ROWS), row 0's twin ring crafted
# to never come back to it (0 -> 1 -> 2 -> 1 ...) or a link out of range: the child
# searches for row 0's own vector, so an unchecked walk meets the ring (and would
# turn in it for ever) first thing.
WALKED = textwrap.dedent(r"""
    import json, sys
    import numpy as np
    import varvedb as vv
    path, q = sys.argv[1], np.load(sys.argv[2])
    out = {}
    with vv.connect(path, readonly=True) as d:
        c = d["docs"]
        vi = c.table.vector_indexes["emb"]
        out["open"] = [vi.unchecked is not None, vi.checkpointed, len(vi.graph)]
        out["ids"] = c.search(q, limit=5).ids
        out["used"] = [vi.unchecked is not None, vi.checkpointed, len(vi.graph)]
        out["again"] = c.search(q, limit=5).ids
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def walked(tmp_path_factory) -> tuple[bytes, str]:
    """A 3 000-row graph (walked by a search), checkpointed, a commit after it."""
    folder = tmp_path_factory.mktemp("walked")
    path = str(folder / "walked.varve")
    x = np.random.default_rng(11).normal(size=(3002, 8)).astype(np.float32)
    with vv.connect(path) as d:
        c = d.create_collection("docs", {"emb": vv.Vector(8, metric="l2", index=vv.HNSW(
            m=4, ef_construction=16, ef_search=16))})
        c.insert_arrays(id=np.arange(3000), emb=x[:3000])
        assert c.wait_indexed(timeout=1800)     # a hang guard only
        d.checkpoint()
        c.insert_arrays(id=[3000, 3001], emb=x[3000:])
    with open(path, "rb") as f:
        layout = Layout.parse(f.read())
    while isinstance(layout.items[-1], Frame):
        layout.items.pop()
    np.save(str(folder / "q.npy"), x[0])
    return layout.build(), str(folder / "q.npy")


@pytest.mark.parametrize("case", ["good", "twin ring", "link out of range"])
def test_a_walked_graph_is_checked_at_its_first_search_before_the_walk(walked, tmp_path,
                                                                      case):
    """Open leaves a checkpoint's links unchecked; the first search checks them (once)
    before its kernel walks them: a crafted graph is refused there and the rows are
    searched exactly, the same answer as the good file's exact search."""
    raw, q = walked

    def edit(meta, blobs):
        if case == "good":
            return
        i = array_index(meta, "1.vx.emb.g." + ("twins" if case == "twin ring" else "links0"))
        a = np.frombuffer(blobs[i], np.int32).copy()
        if case == "twin ring":
            a[:3] = [1, 2, 1]
        else:
            a[0] = 10**6
        blobs[i] = a.tobytes()
    path = write(tmp_path, edited_checkpoint(raw, edit))
    res = subprocess.run([PYTHON, "-c", WALKED, path, q], env=child_env(), capture_output=True,
                         text=True, timeout=600)   # a hang guard only
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout)
    assert out["open"][0] and out["open"][1] > 0 and out["open"][2] > 0   # as the file has it
    with vv.connect(write(tmp_path, raw, "good.varve"), readonly=True) as g:
        exact = g["docs"].search(np.load(q), limit=5, exact=True).ids
    assert out["ids"] == out["again"] == exact and exact[0] == 0
    if case == "good":      # checked, kept
        assert out["used"] == [False, out["open"][1], out["open"][2]]
    else:                   # refused before the walk: empty, its rows searched exactly
        assert out["used"] == [False, 0, 0]


def test_hnsw_validate_rejects_crafted_arrays_with_bounded_work():
    from varvedb.index.hnsw import HnswIndex
    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(300, 8)).astype(np.float32)
    ix = HnswIndex(8, "l2", m=4, ef_construction=16, ef_search=16)
    ix.add(vecs, np.ones(300, np.float32), np.arange(300))
    ix.validate(300)

    def broken(change, match=None):
        arrays = {k: a.copy() for k, a in ix.to_arrays().items()}
        change(arrays)
        with pytest.raises(ValueError, match=match):
            HnswIndex.from_arrays(arrays).validate(300)

    broken(lambda a: a["links0"].__setitem__((3, 0), 3), "links its own node")
    broken(lambda a: a["links0"].__setitem__((3, 0), -1), "gaps")
    broken(lambda a: a["links0"].__setitem__((3, 1), 10**6), "outside the index")
    level0 = int(np.flatnonzero(ix.to_arrays()["levels"] == 0)[0])
    broken(lambda a: a["upper_links"].__setitem__((0, 0), level0), "not nodes there")
    upper = np.flatnonzero(ix.to_arrays()["levels"] > 0)
    broken(lambda a: a["upper_slot"].__setitem__(upper[1], a["upper_slot"][upper[0]]),
           "upper slots")                                            # two nodes' lists overlap
    broken(lambda a: a["params"].__setitem__(11, a["params"][11] - 1))  # lists past the used
    broken(lambda a: a["links0"].__setitem__((3, 0), -7))
    broken(lambda a: a["levels"].__setitem__(0, 100))
    broken(lambda a: a["levels"].__setitem__(0, -5))
    broken(lambda a: a["params"].__setitem__(12, 2**40))            # levels of upper links
    broken(lambda a: a["params"].__setitem__(11, 2**40))            # slots
    broken(lambda a: a["params"].__setitem__(10, 2**62))            # extent: size overflow
    broken(lambda a: a["params"].__setitem__(8, -1))                # top
    broken(lambda a: a["params"].__setitem__(1, 2**46))             # dim: 256 TiB of codes' range
    broken(lambda a: a["params"].__setitem__(5, 2**40))             # ef_search: each walk's scratch
    broken(lambda a: a.__setitem__("params", a["params"].astype(np.int32)))


def test_timestamps_that_cannot_be_read_back_are_refused(valid, tmp_path):
    """A stored timestamp outside years 1..9999 made reads raise OverflowError: the
    writer refuses one now (FieldTypeError), and a file holding one is corrupt."""
    d = vv.connect(str(tmp_path / "w.varve"))
    c = d.create_collection("t", {"at": "timestamp"})
    for bad in (np.array(["10000-01-01"], "datetime64[us]"), np.array(["NaT"], "datetime64[us]")):
        with pytest.raises(vv.FieldTypeError):
            c.insert_arrays(id=[1], at=bad)
    with pytest.raises(vv.FieldTypeError):
        c.insert({"id": 1, "at": np.datetime64("10000-01-01")})
    assert c.count() == 0
    d.close()

    def edit(meta, blobs):
        i = array_index(meta, "v:at")
        blobs[i] = np.full(len(blobs[i]) // 8, 2**62, np.int64).tobytes()
    open_raises_corrupt(write(tmp_path, edited(valid, F.Kind.INSERT, edit)), "years 1..9999")


def test_a_crafted_sparse_vector_is_refused(tmp_path):
    """A sparsevec row is bytes in the INSERT's meta: one whose indices are out of
    order, out of range, or whose size or dimension is not its field's, is corrupt."""
    path = str(tmp_path / "s.varve")
    with vv.connect(path) as d:
        d.sql("CREATE TABLE items (id bigint PRIMARY KEY, v sparsevec(4))")
        d.sql("INSERT INTO items VALUES (1, '{1:1,3:2}/4'), (2, NULL)")
    with open(path, "rb") as f:
        layout = Layout.parse(f.read())
    layout.items = [it for it in layout.items if isinstance(it, Txn)]
    good = vv.SparseVector("{1:1,3:2}/4").to_blob()
    for bad in (np.array([4, 2, 0, 0, 0], "<i4").tobytes(),           # descending
                np.array([4, 0, 4, 0, 0], "<i4").tobytes(),           # index out of range
                np.array([5, 0, 2, 0, 0], "<i4").tobytes(),           # another dimension
                good[:-4], "{1:1}/4", 7):
        lay = copy.deepcopy(layout)
        i, j = frame_of(lay, F.Kind.INSERT)

        def edit(meta, blobs, bad=bad):
            meta["lists"]["v"][0] = bad
        lay.items[i].frames[j] = edit_record(lay.items[i].frames[j], edit)
        open_raises_corrupt(write(tmp_path, lay.build()), "sparsevec")


# ---- lying lengths: a small frame that declares (or holds) a great deal ----------------

TIGHT = {"floor": 0, "headroom": 192 << 20}   # a plain open's peak address space + 192 MiB
BOMB = 1 << 30     # 1 GiB: a zstd frame of ~32 KiB declares (and holds) it


def zstd_of(chunks, size: int) -> bytes:
    """A zstd frame declaring `size` bytes, made from `chunks` without holding them whole."""
    z = zstandard.ZstdCompressor(write_content_size=True).compressobj(size=size)
    return b"".join([z.compress(c) for c in chunks] + [z.flush()])


def runs(byte: bytes, n: int, head: bytes = b""):
    yield head
    while n > 0:
        yield byte * min(n, 1 << 20)
        n -= 1 << 20


def packed_record(meta_z: bytes | None, meta: dict | None = None, blobs=()) -> bytes:
    """A record whose meta is the zstd frame meta_z (bit 31 set), or the plain `meta`."""
    head = meta_z if meta_z is not None else msgspec.msgpack.encode(meta)
    word = len(head) | (record.PACKED_META if meta_z is not None else 0)
    out = bytearray((struct.pack("<I", word) + head).ljust(F.pad(4 + len(head)), b"\0"))
    for b in blobs:
        out.extend(b)
        out.extend(bytes(F.pad(len(out)) - len(out)))
    return bytes(out)


def lying(case: str, insert: Frame) -> bytes:
    """The payload of an INSERT frame whose lengths lie (each frame is a few KiB)."""
    meta, blobs = unpack_record(insert.payload)
    if case == "meta of nils":            # 8 bytes of Python list per byte decoded
        return packed_record(zstd_of(runs(b"\xc0", BOMB, b"\xdd" + struct.pack(">I", BOMB)),
                                     BOMB + 5))
    if case == "meta of maps":            # ~72 bytes of dicts per byte decoded
        return packed_record(zstd_of(runs(b"\x80", BOMB, b"\xdd" + struct.pack(">I", BOMB)),
                                     BOMB + 5))
    i = array_index(meta, "ids")
    if case == "array of zeros":          # a shape and a frame that agree, both huge
        z = zstd_of(runs(b"\0", BOMB), BOMB)
        meta["_arrays"][i] = ["ids", "<i8", [BOMB // 8], len(z)]
    elif case == "content size past the frame":   # declares 1 GiB, holds its first blocks
        z = zstd_of(runs(b"\0", BOMB), BOMB)[:4096]
        meta["_arrays"][i] = ["ids", "<i8", [BOMB // 8], len(z)]
    else:                                 # "no content size": a frame that declares none
        z = zstandard.ZstdCompressor(write_content_size=False).compress(blobs[i])
        meta["_arrays"][i] = ["ids", "<i8", meta["_arrays"][i][2], len(z)]
    blobs[i] = z
    return pack_record(meta, blobs)


LYING = ["meta of nils", "meta of maps", "array of zeros", "content size past the frame",
         "no content size"]


@pytest.mark.parametrize("case", LYING)
def test_lying_lengths_are_refused_before_they_are_allocated(valid, tmp_path, case):
    """Each frame is a few KiB and declares 1 GiB (a zstd frame's content size, the
    array shape that must match it, or the msgpack list inside it). Opened in a child
    whose address space is capped at a plain open's peak + 192 MiB: a typed error,
    never MemoryError (before: the 32 768x ratio let each through to the allocation)."""
    layout = Layout.parse(valid)
    layout.items = [it for it in layout.items if isinstance(it, Txn)]
    i, j = frame_of(layout, F.Kind.INSERT)
    payload = lying(case, layout.items[i].frames[j])
    assert len(payload) < 64 << 10
    layout.items[i].frames[j] = Frame(F.Kind.INSERT, payload)
    data = layout.build()
    outs = open_in_child(tmp_path, valid, data, **TIGHT)
    assert outs == ["ro:CorruptFileError", "hashes:ok", "verify:ok",
                    "rw:CorruptFileError"], outs
    open_raises_corrupt(write(tmp_path, data), "says it holds|does not decode")


def test_a_crafted_checkpoint_is_refused_in_bounded_memory(valid, tmp_path):
    """The same in the checkpoint the superblock names: its load fails (a typed error,
    in bounded memory) and open replays the log to the same state."""
    layout = Layout.parse(valid)
    k = next(k for k, it in enumerate(layout.items) if isinstance(it, Frame))
    layout.items[k] = Frame(F.Kind.CHECKPOINT, lying("meta of nils", layout.items[k]))
    data = layout.build(fix_history=False)
    outs = open_in_child(tmp_path, valid, data, **TIGHT)
    # verify's replay loads the checkpoint too, in the same bounded memory, and
    # reports it: a slot names a checkpoint that does not hold the log's state
    assert outs == ["ro:checkpoint:CorruptFileError", "ro:ok", "hashes:ok",
                    "verify:checkpoint:CorruptFileError", "verify:damage",
                    "rw:checkpoint:CorruptFileError", "rw:ok"], outs
    assert state(write(tmp_path, data)) == state(write(tmp_path, valid, "good.varve"))


def test_compressed_parts_beyond_the_ratio_are_padded_to_it():
    """A run of one value compresses far past MAX_RATIO; the writer pads it so a
    reader's bound holds, and it reads back."""
    zeros = np.zeros(1 << 20, np.int64)
    parts, length, _ = record.encode({"x": [None] * 100_000}, {"a": zeros},
                                     packed=lambda name: True)
    payload = b"".join(bytes(p) for p in parts)
    assert len(payload) == length and zeros.nbytes // record.MAX_RATIO <= length < 400_000
    meta, arrays, _ = record.decode(payload)
    assert meta == {"x": [None] * 100_000} and np.array_equal(arrays["a"], zeros)


def test_a_crafted_ivf_dimension_in_a_checkpoint_allocates_nothing(tmp_path):
    """An IVF index's params in a checkpoint said dim = 2**40 with pq_m = 1: restoring
    it made empty codebooks of 256 x dim floats (MemoryError) before any array was
    compared. dim is checked against the codebooks present first; the index is
    rebuilt (as any graph that does not fit) and the state is the same."""
    path = str(tmp_path / "ivf.varve")
    rng = np.random.default_rng(5)
    d = vv.connect(path)
    c = d.create_collection("docs", {"emb": vv.Vector(8, metric="l2", index=vv.IVFPQ(
        lists=4, pq_m=2))})
    c.insert_arrays(id=np.arange(1100), emb=rng.normal(size=(1100, 8)).astype(np.float32))
    assert c.wait_indexed(timeout=1800)     # a hang guard only
    d.close()
    with open(path, "rb") as f:
        valid = Layout.parse(f.read()).build()

    def edit(meta, blobs):
        i = array_index(meta, "1.vx.emb.g.params")
        params = np.frombuffer(blobs[i], np.int64).copy()
        assert params[1] == 8 and params[4] == 2 and params[8] == 1     # dim, pq_m, trained
        params[1], params[4] = 2**40, 1
        blobs[i] = params.tobytes()
    data = edited_checkpoint(valid, edit)
    outs = open_in_child(tmp_path, valid, data, **TIGHT)
    assert outs == ["ro:ok", "hashes:ok", "verify:ok", "rw:ok"], outs
    assert state(write(tmp_path, data)) == state(write(tmp_path, valid, "good.varve"))
