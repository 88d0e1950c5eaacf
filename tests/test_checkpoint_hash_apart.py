"""A large checkpoint's hash is computed on a thread beside its decoding
(checkpoint._digest_apart, issue 28: open's SHA-256 of a 100k x 128 graph is
~25 ms on a core of its own). What must hold: a damaged payload is refused as
damaged whatever its decoding raised first (no cause), a good one loads as it
did, and open still falls back to replaying the log. HASH_APART is lowered so
these small files take the threaded path."""
from __future__ import annotations

import numpy as np
import pytest

import varvedb as vv
from varvedb.engine import checkpoint
from varvedb.errors import CorruptFileError
from varvedb.storage import format as F


@pytest.fixture(params=["apart", "inline"])
def apart(request, monkeypatch):
    if request.param == "apart":
        monkeypatch.setattr(checkpoint, "HASH_APART", 0)
        monkeypatch.setattr(checkpoint, "_CORES", 2)
    return request.param


def _file(path) -> tuple[bytes, F.Superblock, list]:
    rng = np.random.default_rng(3)
    with vv.connect(path) as db:
        c = db.create_collection("docs", {"tag": "int", "embedding": vv.Vector(8)})
        c.insert_arrays(id=np.arange(300), tag=np.arange(300) % 7,
                        embedding=rng.standard_normal((300, 8), dtype=np.float32))
        c.create_index("embedding", vv.HNSW())
        db.checkpoint()
        c.insert({"id": 1000, "tag": 1, "embedding": [1.0] * 8})   # after it: replayed
        sb = db.engine.log.file.superblocks[0]
        rows = _rows(c)
    with open(path, "rb") as f:
        return f.read(), sb, rows


def _rows(c) -> list:
    return sorted((d["id"], d["tag"]) for d in c.find(limit=1000, select=["tag"]))


def test_a_good_checkpoint_loads(tmp_path, apart):
    raw, sb, rows = _file(str(tmp_path / "a.varve"))
    state = checkpoint.load(memoryview(raw), sb.checkpoint_offset, sb)
    assert state.version == sb.checkpoint_version and "docs" in state.names
    with vv.connect(str(tmp_path / "a.varve")) as db:
        assert _rows(db.collection("docs")) == rows
        assert len(db.collection("docs").search(vector=[1.0] * 8, limit=5)) == 5


@pytest.mark.parametrize("where", ["meta length", "meta", "last byte"])
def test_a_damaged_checkpoint_is_refused_as_damaged(tmp_path, apart, where):
    path = str(tmp_path / "d.varve")
    raw, sb, rows = _file(path)
    hdr = F.unpack_frame_header(raw[sb.checkpoint_offset:])
    body = sb.checkpoint_offset + F.FRAME_HEADER_SIZE
    at = {"meta length": body + 3, "meta": body + 9, "last byte": body + hdr.length - 1}[where]
    bad = bytearray(raw)
    bad[at] ^= 0x41     # the meta length past the payload, a meta key, the last array byte
    with pytest.raises(CorruptFileError, match="is damaged") as e:
        checkpoint.load(memoryview(bytes(bad)), sb.checkpoint_offset, sb)
    assert e.value.__cause__ is None
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(bytes([bad[at]]))
    with vv.connect(path, readonly=True) as db:     # open replays the log instead
        assert _rows(db.collection("docs")) == rows
