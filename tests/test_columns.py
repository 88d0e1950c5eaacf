"""Append-only columns: growth keeps every reader's view valid, and a bulk load
holds its data about once.

Large columns grow inside reserved address space instead of by doubling
copies; the tests shrink the thresholds so that path runs on small arrays,
and check it against a plain list oracle.
"""
from __future__ import annotations

import subprocess
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import varvedb as vv
from varvedb.engine import columns
from varvedb.engine.columns import Growable

from conftest import PYTHON, child_env


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


@pytest.mark.parametrize("reserve_from", [1 << 10, 1 << 40])   # reserved rooms / plain arrays
def test_growth_keeps_values_and_every_earlier_view(monkeypatch, reserve_from):
    monkeypatch.setattr(columns, "RESERVE_FROM", reserve_from)
    monkeypatch.setattr(columns, "RESERVE_FACTOR", 4)
    monkeypatch.setattr(columns, "RESERVE_ROOM", 0)
    g = Growable(np.float32, (8,))
    oracle, views = [], []
    rng = np.random.default_rng(5)
    for step in range(60):
        block = rng.normal(size=(int(rng.integers(1, 300)), 8)).astype(np.float32)
        g.append(block)
        oracle.append(block)
        views.append((g.view(), np.concatenate(oracle)))
        if step == 30:                      # a rolled-back tail is written anew
            g.truncate(g.n - len(block))
            oracle.pop()
    assert np.array_equal(g.view(), np.concatenate(oracle))
    for view, expected in views[:30]:       # views taken before the rollback point
        assert np.array_equal(view, expected)


def test_large_column_grows_in_place_until_its_room_is_full(monkeypatch):
    monkeypatch.setattr(columns, "RESERVE_FROM", 1 << 12)
    monkeypatch.setattr(columns, "RESERVE_FACTOR", 8)
    monkeypatch.setattr(columns, "RESERVE_ROOM", 0)
    g = Growable(np.int64)
    g.append(np.arange(1024))                      # 8 KiB: the first reserved room
    start, room = _address(g.data), g._room
    assert room is not None and len(room) == 8 * g.data.nbytes
    while (g.n + 1024) * 8 <= len(room):
        g.append(np.arange(g.n, g.n + 1024))
        assert _address(g.data) == start           # same pages, nothing copied
    g.append(np.arange(g.n, g.n + 1024))           # past the room: moves once
    assert _address(g.data) != start and g._room is not room
    assert np.array_equal(g.view(), np.arange(g.n))


def test_read_only_data_from_a_checkpoint_is_copied_before_the_first_append(monkeypatch):
    monkeypatch.setattr(columns, "RESERVE_FROM", 1 << 10)
    base = np.arange(500, dtype=np.int64)
    base.flags.writeable = False
    g = Growable(np.int64, data=base)
    g.append(np.arange(500, 700))
    assert np.array_equal(g.view(), np.arange(700)) and np.array_equal(base, np.arange(500))


def test_bulk_load_peak_memory_is_close_to_the_data_size(tmp_path):
    # 240 000 x 256 f32 = 234 MiB, loaded in blocks of 20 000 rows in one
    # transaction; doubling growth peaked near twice the data (old and new
    # arrays at once), and the writer must not keep a copy of what it wrote
    script = textwrap.dedent(f"""
        import numpy as np, varvedb as vv
        def rss():
            for line in open("/proc/self/status"):
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
        db = vv.connect({str(tmp_path / "big.varve")!r})
        c = db.create_collection("t", {{"v": vv.Vector(256)}})
        block = np.random.default_rng(0).normal(size=(20_000, 256)).astype(np.float32)
        before = rss()
        with db.transaction():
            for i in range(12):
                c.insert_arrays(id=np.arange(i * 20_000, (i + 1) * 20_000), v=block)
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                print(int(line.split()[1]) / 1024 - before, c.count())
    """)
    out = subprocess.run([PYTHON, "-c", script], env=child_env(), capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    grown_mb, count = out.stdout.split()
    data_mb = 240_000 * 256 * 4 / 2**20
    assert int(count) == 240_000
    assert float(grown_mb) < 1.3 * data_mb, (grown_mb, data_mb)


def test_open_from_a_checkpoint_builds_the_id_map_only_when_a_write_or_get_needs_it(tmp_path):
    """The id -> live row dict costs ~90 bytes a row (450 MB at 5M rows): a reader
    that only searches never builds it; the first write or get by id does, right."""
    path = str(tmp_path / "ids.varve")
    db = vv.connect(path)
    c = db.create_collection("docs", {"v": vv.Vector(2, metric="l2")})
    c.insert([{"id": i, "v": [i, 0]} for i in range(100)])
    c.delete(ids=[5])
    db.checkpoint()
    db.close()
    db = vv.connect(path)
    t = db["docs"].table
    assert t.built_live_maps == ()
    assert db["docs"].search(vector=[3, 0], limit=2).ids == [3, 2] and t.built_live_maps == ()
    with pytest.raises(vv.DuplicateIdError):
        db["docs"].insert({"id": 7, "v": [0, 0]})
    assert len(t.live) == 99 and 5 not in t.live
    db["docs"].insert({"id": 5, "v": [5, 5]})
    assert db["docs"].get(5)["v"].tolist() == [5, 5]
    db.close()


@settings(max_examples=200, deadline=None)
@given(dim=st.integers(1, 400), scale=st.sampled_from([1e-20, 1e-3, 1.0, 1e3, 1e15]),
       seed=st.integers(0, 2**32 - 1))
def test_a_one_row_norm_is_the_bits_a_batch_gives(dim, scale, seed):
    """A one-row append takes its norm by the row's dot and math.sqrt; a batch's
    come from norms_of. Both must store the same f32 bits (a replay, a vacuum's
    rewrite in one batch, and the live write agree on every distance)."""
    rows = (np.random.default_rng(seed).normal(size=(6, dim)) * scale).astype(np.float32)
    one, batch = (columns.VectorColumn(vv.Vector(dim)) for _ in range(2))
    for r in rows:
        one.append(r[None], np.zeros(1, bool))
    batch.append(rows, np.zeros(6, bool))
    assert one.norms.view().tobytes() == batch.norms.view().tobytes()
    assert one.arena.view().tobytes() == batch.arena.view().tobytes()
