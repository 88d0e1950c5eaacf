"""Paths that name no openable file: connect and backup raise a typed VarveError
naming the path, with the operating system's error as its cause; nothing is
created and the source file is unchanged.

The tests run as root, so "no permission" is not a case a mode bit can make;
the unwritable destination is a path under a regular file (ENOTDIR for root
too) and, where there is one, a folder of sysfs (EACCES for root)."""
from __future__ import annotations

import os

import pytest

import varvedb as vv

from conftest import file_digest


@pytest.fixture
def places(tmp_path):
    (tmp_path / "a_file").write_bytes(b"not a folder")
    (tmp_path / "a_dir").mkdir()
    os.mkfifo(tmp_path / "a_fifo")
    return tmp_path


# (path under tmp_path, error, the OSError it is made from, or None)
CONNECT = [
    ("a_dir", vv.StorageError, IsADirectoryError),
    ("a_file/db.varve", vv.StorageError, NotADirectoryError),
    ("a_fifo", vv.StorageError, OSError),        # refused, never waited on for a writer
    ("nul\0byte.varve", vv.OptionError, ValueError),
    ("no_dir/db.varve", vv.FileMissingError, FileNotFoundError),
]


@pytest.mark.parametrize("readonly", [False, True], ids=["writer", "reader"])
@pytest.mark.parametrize("name,error,cause", CONNECT, ids=[c[0] for c in CONNECT])
def test_connect_to_a_path_that_is_no_file(places, name, error, cause, readonly):
    path = str(places / name)
    before = sorted(os.listdir(places))
    with pytest.raises(error) as e:
        vv.connect(path, readonly=readonly)
    assert repr(path)[1:-1] in str(e.value)
    assert isinstance(e.value.__cause__, cause)
    if isinstance(e.value, vv.StorageError):
        assert e.value.os_error is e.value.__cause__ and e.value.errno == e.value.__cause__.errno
    assert sorted(os.listdir(places)) == before


def _sysfs_dest() -> list:
    return [pytest.param("/sys/varvedb-backup.varve", vv.StorageError, OSError, id="sysfs")] \
        if os.path.isdir("/sys/kernel") else []


@pytest.mark.parametrize("dest,error,cause", [
    ("a_dir", vv.OptionError, None),
    ("no_dir/b.varve", vv.StorageError, FileNotFoundError),
    ("a_file/b.varve", vv.StorageError, NotADirectoryError),
    ("nul\0byte.varve", vv.OptionError, ValueError),
    *_sysfs_dest()], ids=lambda x: x if isinstance(x, str) else "")
def test_backup_to_a_path_that_is_no_new_file(places, dest, error, cause):
    src = str(places / "src.varve")
    db = vv.connect(src)
    db.create_collection("c", {"a": "int"}).insert({"id": 1, "a": 1})
    db.checkpoint()
    digest, before = file_digest(src), sorted(os.listdir(places))
    path = dest if dest.startswith("/") else str(places / dest)
    with pytest.raises(error) as e:
        db.backup(path)
    assert repr(path)[1:-1] in str(e.value)
    if cause is not None:
        assert isinstance(e.value.__cause__, cause)
    assert file_digest(src) == digest and sorted(os.listdir(places)) == before
    assert db["c"].count() == 1
    db.close()


@pytest.mark.parametrize("path", ["", b"", None], ids=["empty str", "empty bytes", "None"])
def test_an_empty_or_missing_path_is_refused_not_taken_for_memory(tmp_path, monkeypatch,
                                                                  path):
    """An empty path names no file: an OptionError saying so, never a database kept
    silently in memory (":memory:", or no path at all, is how one asks for that)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(vv.OptionError, match=":memory:"):
        vv.connect(path)
    assert os.listdir(tmp_path) == []
    for memory in (vv.connect(), vv.connect(":memory:")):
        assert memory.path is None
        memory.close()
