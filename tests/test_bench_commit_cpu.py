"""`varvedb bench commit-cpu`: a short run reports the bare figure and every step
of the write path, and leaves the write path as it found it (no timer left
wrapped round a method)."""
from __future__ import annotations

from varvedb import collection
from varvedb.storage import fileio
from varvedb_bench import commit_cpu


def test_commit_cpu_reports_each_step_and_unwraps_them(tmp_path):
    insert, fdatasync = collection.Collection.insert, fileio.FileIO.fdatasync
    out = commit_cpu.run(str(tmp_path), rounds=2, commits=5, dim=8)
    assert collection.Collection.insert is insert and fileio.FileIO.fdatasync is fdatasync
    steps = {s["step"].strip(): s for s in out["steps"]}
    for name in ("Collection.insert", "Collection.prepare_rows", "record.encode",
                 "FileIO.pwritev", "FileIO.fdatasync", "LogWriter.commit", "Engine._apply"):
        assert name in steps
    assert steps["FileIO.fdatasync"]["incl_us"] > 0
    assert steps["Collection.insert"]["incl_us"] >= steps["Session.commit"]["incl_us"]
    assert out["bare"]["cpu_us"]["median"] > 0 and out["bare"]["fsync_wall_us"]["median"] > 0
    assert list(tmp_path.iterdir()) == []          # its file is removed
    assert "fdatasync" in commit_cpu.format_table(out)


def test_commit_cpu_takes_the_wide_shape(tmp_path):
    out = commit_cpu.run(str(tmp_path), rounds=1, commits=3, dim=8, shape="wide")
    assert "wide rows" in out["figure"]
    assert out["bare"]["cpu_us"]["median"] > 0
    assert list(tmp_path.iterdir()) == []
