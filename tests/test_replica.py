"""Read replicas by log shipping (varvedb/replica.py, GET /log, storage/shipping.py):
a real leader `varvedb serve` and real followers (`varvedb serve --replica-of`,
`varvedb replicate`) on 127.0.0.1.

Waits wait on an event — a replica's read naming the version the leader's
write answered (X-Varve-Min-Version) is answered once the replica has that
version — with a hang guard of minutes; nothing asserts on time.
"""
from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import varvedb as vv
from server_proc import SRC, ServerProcess
from test_server import TOKEN, Http

GUARD = 300.0       # seconds: a hang guard, never a measure
DIM = 4


def replica_env(extra: dict | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "VARVEDB_TOKEN"}
    env["PYTHONPATH"] = SRC + os.pathsep + env.get("PYTHONPATH", "")
    env["VARVEDB_LEADER_TOKEN"] = TOKEN
    return {**env, **(extra or {})}


@pytest.fixture(scope="module")
def leader(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("leader") / "leader.varve")
    with ServerProcess(path, token=TOKEN) as srv:
        client = vv.Client(srv.url, token=TOKEN)
        docs = client.create_collection("docs", {"title": vv.Text(fts=True), "tag": "int",
                                                 "emb": vv.Vector(DIM)})
        rng = np.random.default_rng(3)
        docs.insert([{"id": i, "title": f"doc {i} word{i % 3}", "tag": i % 4,
                      "emb": rng.standard_normal(DIM).tolist()} for i in range(30)])
        yield srv, client
        client.close()


def replicate(url: str, dest: str, *args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "varvedb", "replicate", url, dest, *args],
                            env=replica_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, **popen)


def replicate_once(url: str, dest: str) -> str:
    p = replicate(url, dest, "--once")
    out, _ = p.communicate(timeout=GUARD)
    text = out.decode(errors="replace")
    assert p.returncode == 0, text
    return text


def leader_version(client) -> int:
    return client.history()[-1].version


def answers(http: Http, version: int) -> tuple:
    """What a reader sees at `version` or later: every row, and three searches."""
    at = {"X-Varve-Min-Version": str(version)}
    out = []
    status, found, _ = http("POST", "/collections/docs/find",
                            {"limit": 1000}, headers=at)
    assert status == 200, found
    out.append(found["items"] if "items" in found else found)
    for body in ({"vector": [0.5, -0.2, 0.1, 0.3], "limit": 5, "exact": True},
                 {"text": "word1", "limit": 10},
                 {"vector": [0.1, 0.1, 0.1, 0.1], "where": "tag = 2", "limit": 3,
                  "exact": True}):
        status, res, _ = http("POST", "/collections/docs/search", body, headers=at)
        assert status == 200, res
        out.append([(h["id"], h.get("score")) for h in res["hits"]])
    status, item, _ = http("GET", "/collections/docs/items/1", headers=at)
    out.append((status, item))
    return tuple(json.dumps(o, sort_keys=True) for o in out)


def file_answers(path: str) -> tuple:
    with vv.connect(path, readonly=True) as db:
        docs = db.collection("docs")
        rows = sorted((h["id"], h["title"], h["tag"]) for h in docs.get(limit=10_000))
        return db.engine.visible, rows


def serving_replica(leader_srv, dest: str) -> ServerProcess:
    """`varvedb serve dest --replica-of` the leader (a context manager)."""
    return ServerProcess(dest, token=TOKEN, args=["--replica-of", leader_srv.url],
                         env={"VARVEDB_LEADER_TOKEN": TOKEN})


def resumed_as_the_leader(srv, client, dest: str, tmp_path) -> None:
    """`replicate --once` brings dest to the leader's newest version without a
    re-seed, equal to the leader's backup, and it verifies."""
    out = replicate_once(srv.url, dest)
    assert "re-seeding" not in out, out
    lb = str(tmp_path / "leader-copy.varve")
    client.backup(lb)
    assert file_answers(dest) == file_answers(lb)
    assert file_answers(dest)[0] == leader_version(client)
    with vv.connect(dest, readonly=True) as db:
        assert db.verify().ok


def test_a_replica_reaches_every_commit_and_answers_as_the_leader_does(leader, tmp_path):
    srv, client = leader
    dest = str(tmp_path / "replica.varve")
    with serving_replica(srv, dest) as rep:
        lh, rh = Http(srv), Http(rep)
        docs = client.collection("docs")
        rng = np.random.default_rng(5)
        ops = 0
        for i in range(12):
            if i % 3 == 0:
                docs.insert([{"id": 100 + i, "title": f"new {i} word1", "tag": i % 4,
                              "emb": rng.standard_normal(DIM).tolist()}])
            elif i % 3 == 1:
                docs.upsert([{"id": i, "title": f"changed {i} word1", "tag": 2,
                              "emb": rng.standard_normal(DIM).tolist()}])
            else:
                docs.delete(ids=[i])
            ops += 1
            v = leader_version(client)
            assert answers(rh, v) == answers(lh, v)
        status, h, _ = rh("GET", "/health")
        assert status == 200 and h["replica_of"] == srv.url and h["version"] >= v
        assert h["lag_versions"] >= 0 and h["reseeds"] == 0
        status, metrics, _ = rh("GET", "/metrics")
        assert "varvedb_replica_lag_versions" in metrics
        assert "varvedb_replica_lag_seconds" in metrics
        # a restore on the leader is a commit like any other: followed
        old = v - 6
        new = client.restore(old)
        assert answers(rh, new) == answers(lh, new)
        # writes to the replica are refused, naming the leader; nothing changes
        before = answers(rh, new)
        status, err, r = rh("POST", "/collections/docs/items", [{"id": 999, "tag": 1}])
        assert status == 421 and err["error"]["type"] == "ReplicaReadOnlyError"
        assert srv.url in err["error"]["message"]
        status, err, _ = rh("POST", "/sql", {"sql": "DELETE FROM docs WHERE tag = 1"})
        assert status == 421 and err["error"]["type"] == "ReplicaReadOnlyError"
        status, err, _ = rh("POST", "/vacuum", {})
        assert status == 421
        rc = vv.Client(rep.url, token=TOKEN)
        with pytest.raises(vv.ReplicaReadOnlyError, match="read replica"):
            rc.collection("docs").insert([{"id": 998, "tag": 1}])
        rc.close()
        assert answers(rh, new) == before
        lh.close()
        rh.close()


def test_the_log_route_refuses_what_is_not_the_leaders_chain(leader):
    srv, client = leader
    h = Http(srv)
    v = leader_version(client)
    status, err, _ = h("GET", f"/log?after={v}&chain={'ab' * 32}")
    assert status == 409 and err["error"]["type"] == "LogMismatchError"
    for bad in ("after=x&chain=" + "ab" * 32, "after=1&chain=zz", "after=1",
                f"after=1&chain={'ab' * 32}&wait=-1"):
        status, err, _ = h("GET", f"/log?{bad}")
        assert status == 400 and err["error"]["type"] == "RequestError", bad
    h.close()
    status, err, _ = Http(srv, token=None)("GET", f"/log?after=0&chain={'ab' * 32}")
    assert status == 401


def test_a_killed_replica_resumes_and_loses_nothing(leader, tmp_path):
    srv, client = leader
    dest = str(tmp_path / "killed.varve")
    docs = client.collection("docs")
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            docs.upsert([{"id": 500 + i % 40, "title": f"k {i}", "tag": i % 4,
                          "emb": [float(i), 0.0, 1.0, 0.0]}])
            i += 1
    follower = replicate(srv.url, dest)
    t = threading.Thread(target=writer)
    t.start()
    try:
        # once the follower has applied commits past its seed, kill it mid-stream
        seeded = None
        deadline = time.monotonic() + GUARD
        while True:
            assert time.monotonic() < deadline and follower.poll() is None
            if os.path.exists(dest):
                try:
                    with vv.connect(dest, readonly=True) as db:
                        seeded = seeded or db.engine.visible
                        if db.engine.visible >= seeded + 20:
                            break
                except vv.VarveError:
                    pass     # the file's first bytes are being written
        follower.send_signal(signal.SIGKILL)
        follower.wait()
    finally:
        stop.set()
        t.join()
    killed_at = file_answers(dest)[0]
    resumed_as_the_leader(srv, client, dest, tmp_path)
    assert file_answers(dest)[0] >= killed_at


def test_a_vacuum_that_dropped_the_replicas_version_reseeds_it(leader, tmp_path):
    srv, client = leader
    dest = str(tmp_path / "behind.varve")
    replicate_once(srv.url, dest)
    docs = client.collection("docs")
    for i in range(3):
        docs.upsert([{"id": 700 + i, "title": f"v {i}", "tag": 1, "emb": [1.0, 0, 0, 0]}])
    client.vacuum(keep=1)      # the replica's version is gone from the leader's file
    out = replicate_once(srv.url, dest)
    assert "re-seeding" in out and "vacuum" in out, out
    lb = str(tmp_path / "after-vacuum.varve")
    client.backup(lb)
    assert file_answers(dest) == file_answers(lb)
    # and one that stands on a version the vacuum kept follows it without a re-seed
    docs.upsert([{"id": 800, "title": "after", "tag": 3, "emb": [0, 1.0, 0, 0]}])
    out = replicate_once(srv.url, dest)
    assert "re-seeding" not in out, out
    assert file_answers(dest)[0] == leader_version(client)


def test_a_replica_of_another_file_is_reseeded(leader, tmp_path):
    srv, client = leader
    dest = str(tmp_path / "other.varve")
    with vv.connect(dest) as db:     # another file, with versions of its own
        other = db.create_collection("docs", {"title": vv.Text(), "tag": "int",
                                              "emb": vv.Vector(DIM)})
        for i in range(3):
            other.insert([{"id": 9000 + i, "title": "x", "tag": 0, "emb": [0, 0, 0, 1.0]}])
    out = replicate_once(srv.url, dest)
    assert "re-seeding" in out and "does not hold version" in out, out
    lb = str(tmp_path / "leader-now.varve")
    client.backup(lb)
    assert file_answers(dest) == file_answers(lb)
    assert not os.path.exists(dest + ".reseed")


def test_a_shipped_commit_that_does_not_check_is_refused_and_leaves_the_file(tmp_path):
    from varvedb.storage.shipping import Unshipper
    leader_db = vv.connect(str(tmp_path / "l.varve"))
    docs = leader_db.create_collection("docs", {"tag": "int"})
    docs.insert([{"id": 1, "tag": 1}])
    leader_db.backup(str(tmp_path / "r.varve"))
    docs.insert([{"id": 2, "tag": 2}])
    follower = vv.connect(str(tmp_path / "r.varve"))
    try:
        e = follower.engine
        _, size, chunks = leader_db.engine.log_after(e.visible, e.log.chain)
        data = bytearray(b"".join(chunks))
        assert len(data) == size
        commits = Unshipper(size).feed(bytes(data))
        assert len(commits) == 1
        frames, rec = commits[0]
        # a changed payload byte: the frame's hash refuses it
        tampered = bytearray(data)
        tampered[64 + 10] ^= 1
        with pytest.raises(vv.CorruptFileError):
            Unshipper(size).feed(bytes(tampered))
        # a commit record from another chain: the log refuses it, the file is unchanged
        end = e.log.end
        bad = type(rec)(**{**rec.__dict__, "prev_chain": bytes(32)})
        with pytest.raises(vv.CorruptFileError, match="does not follow"):
            e.follow([(frames, bad)])
        assert e.log.end == end and e.visible == 2
        e.follow([(frames, rec)])
        assert follower.collection("docs").get(2)["tag"] == 2
    finally:
        follower.close()
        leader_db.close()


def test_a_frame_or_stream_past_the_announced_size_is_refused_at_once(tmp_path):
    """A replica takes no more than the leader announced (X-Varve-Log-Bytes): a frame
    header whose length runs past it is refused before its bytes are waited for (a
    damaged or crafted length buffered without end before), and so is a byte past it;
    a leader that announces nothing is refused."""
    from varvedb.storage import format as F
    from varvedb.storage.shipping import Unshipper
    huge = F.pack_frame_header(F.Kind.INSERT, 1 << 40, bytes(32))
    with pytest.raises(vv.CorruptFileError, match="runs past"):
        Unshipper(1 << 20).feed(huge)
    leader_db = vv.connect(str(tmp_path / "l.varve"))
    leader_db.create_collection("docs", {"tag": "int"}).insert([{"id": 1, "tag": 1}])
    e = leader_db.engine
    _, size, chunks = e.log_after(0, F.genesis_chain(e.log.file.file_id))
    data = b"".join(chunks)
    assert len(Unshipper(size).feed(data)) >= 1
    with pytest.raises(vv.CorruptFileError, match="more than"):
        Unshipper(size).feed(data + bytes(8))
    leader_db.close()

    class Leader(http.server.BaseHTTPRequestHandler):
        announce = True

        def do_GET(self):
            self.send_response(200)
            self.send_header("X-Varve-Log-Version", "9")
            if Leader.announce:
                self.send_header("X-Varve-Log-Bytes", "100")
            self.send_header("Content-Length", str(len(huge)))
            self.end_headers()
            self.wfile.write(huge)

        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Leader)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        vv.connect(str(tmp_path / "r.varve")).close()
        from varvedb.replica import Replica
        r = Replica(f"http://127.0.0.1:{server.server_address[1]}", str(tmp_path / "r.varve"))
        db = r.open()
        try:
            with pytest.raises(vv.CorruptFileError, match="runs past"):
                r.pull(0)
            Leader.announce = False
            with pytest.raises(vv.ServerUnavailableError, match="X-Varve-Log-Bytes"):
                r.pull(0)
            assert db.version == 0      # nothing of either answer was applied
        finally:
            db.close()
    finally:
        server.shutdown()
        server.server_close()


def test_a_batch_keeps_the_commits_before_one_that_does_not_check(tmp_path):
    leader_db = vv.connect(str(tmp_path / "l.varve"))
    docs = leader_db.create_collection("docs", {"tag": "int"})
    leader_db.backup(str(tmp_path / "r.varve"))
    for i in range(3):
        docs.insert([{"id": i, "tag": i}])
    follower = vv.connect(str(tmp_path / "r.varve"))
    try:
        from varvedb.storage.shipping import Unshipper
        e = follower.engine
        _, size, chunks = leader_db.engine.log_after(e.visible, e.log.chain)
        commits = Unshipper(size).feed(b"".join(chunks))
        assert len(commits) == 3
        frames, rec = commits[2]
        commits[2] = (frames, type(rec)(**{**rec.__dict__, "timestamp_us": 1}))
        with pytest.raises(vv.CorruptFileError):
            e.follow(commits)
        assert e.visible == leader_db.engine.visible - 1
        assert sorted(d["id"] for d in follower.collection("docs").get()) == [0, 1]
    finally:
        follower.close()
        leader_db.close()
    with vv.connect(str(tmp_path / "r.varve"), readonly=True) as db:
        assert db.verify().ok and db.collection("docs").count() == 2


def test_a_leader_url_that_is_not_http_is_refused(tmp_path):
    from varvedb.replica import Replica
    for url in ("ftp://127.0.0.1/", "127.0.0.1:8080", ""):
        with pytest.raises(vv.OptionError):
            Replica(url, str(tmp_path / "r.varve"))
    assert not os.path.exists(tmp_path / "r.varve")


def test_a_replica_serves_with_one_process_and_http_only(tmp_path):
    from click.testing import CliRunner

    from varvedb.cli import main
    path = str(tmp_path / "r.varve")
    for extra, says in ((["--workers", "2"], "one process"), (["--pg", "0"], "not --pg")):
        r = CliRunner().invoke(main, ["serve", path, "--no-warm", "--replica-of",
                                      "http://127.0.0.1:9", *extra])
        assert r.exit_code != 0 and says in r.output, r.output
    assert not os.path.exists(path)


def test_a_replica_follows_a_leader_with_read_workers(tmp_path):
    """GET /log on a read worker of `serve --workers 2`: its long poll waits on the
    writer's board, so the replica still gets each commit as it is made."""
    with ServerProcess(str(tmp_path / "wl.varve"), token=TOKEN,
                       args=["--workers", "2"]) as srv:
        client = vv.Client(srv.url, token=TOKEN)
        docs = client.create_collection("docs", {"tag": "int"})
        with serving_replica(srv, str(tmp_path / "wr.varve")) as rep:
            rh = Http(rep)
            for i in range(4):
                docs.insert([{"id": i, "tag": i}])
                v = leader_version(client)
                status, item, _ = rh("GET", f"/collections/docs/items/{i}",
                                     headers={"X-Varve-Min-Version": str(v)})
                assert status == 200 and item["tag"] == i, item
            rh.close()
        client.close()


# a `varvedb replicate` whose storage SIGKILLs its own process inside the Nth commit
# it follows: that commit's frames are written (as a write of the frames that did
# not reach the commit frame leaves them), its commit frame never is, and the
# commits of the same pull before it are written but not yet synced
_KILLED_INSIDE = """
import os, signal, sys
from varvedb.storage.log_writer import LogWriter
real, seen = LogWriter.commit_shipped, []
def commit_shipped(self, rec):
    seen.append(rec.version)
    if len(seen) == int(sys.argv[1]):
        self._flush()
        print("killed", rec.version, self.commit_end, self.end, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    return real(self, rec)
LogWriter.commit_shipped = commit_shipped
from varvedb.cli import main
main(["replicate", *sys.argv[2:], "--once"])
"""


def test_a_replica_killed_inside_a_half_written_commit_resumes(leader, tmp_path):
    srv, client = leader
    dest = str(tmp_path / "torn.varve")
    replicate_once(srv.url, dest)
    seeded = file_answers(dest)[0]
    docs = client.collection("docs")
    for i in range(8):      # eight commits, pulled in one answer
        docs.upsert([{"id": 600 + i, "title": f"torn {i}", "tag": i % 4,
                      "emb": [float(i), 1.0, 0.0, 0.0]}])
    p = subprocess.run([sys.executable, "-c", _KILLED_INSIDE, "5", srv.url, dest],
                       env=replica_env(), capture_output=True, text=True, timeout=GUARD)
    assert p.returncode == -signal.SIGKILL, p.stdout + p.stderr
    word, version, commit_end, end = p.stdout.split()
    assert word == "killed" and int(version) == seeded + 5
    assert int(end) > int(commit_end)          # the fifth commit's frames, no commit frame
    assert os.path.getsize(dest) >= int(end)
    # the four whole commits before it are kept (written, and a kill keeps the page
    # cache); the torn one is not seen
    assert file_answers(dest)[0] == seeded + 4
    resumed_as_the_leader(srv, client, dest, tmp_path)


def test_a_vacuum_that_kept_the_replicas_version_is_followed_without_a_reseed(leader,
                                                                              tmp_path):
    srv, client = leader
    dest = str(tmp_path / "kept.varve")
    replicate_once(srv.url, dest)
    stands_on = file_answers(dest)[0]
    docs = client.collection("docs")
    for i in range(3):
        docs.upsert([{"id": 720 + i, "title": f"kept {i}", "tag": 2, "emb": [0, 0, 1.0, 0]}])
    client.vacuum(keep=4)       # the replica's version, three back, is kept
    assert client.history()[0].version == stands_on       # and the ones before it not
    docs.upsert([{"id": 730, "title": "after the vacuum", "tag": 1, "emb": [0, 0, 0, 1.0]}])
    resumed_as_the_leader(srv, client, dest, tmp_path)


def test_a_serving_replica_follows_a_vacuum_and_says_when_a_version_does_not_come(leader,
                                                                                   tmp_path):
    srv, client = leader
    dest = str(tmp_path / "serving.varve")
    with serving_replica(srv, dest) as rep:
        lh, rh = Http(srv), Http(rep)
        docs = client.collection("docs")
        docs.upsert([{"id": 740, "title": "before", "tag": 0, "emb": [1.0, 1.0, 0, 0]}])
        v = leader_version(client)
        assert answers(rh, v) == answers(lh, v)
        client.vacuum(keep=1)       # the version the replica stands on is the one kept
        docs.upsert([{"id": 741, "title": "after", "tag": 3, "emb": [0, 1.0, 1.0, 0]}])
        v = leader_version(client)
        assert answers(rh, v) == answers(lh, v)
        status, h, _ = rh("GET", "/health")
        assert status == 200 and h["reseeds"] == 0 and h["version"] == v
        assert h["lag_versions"] == 0 and h["error"] is None
        status, metrics, _ = rh("GET", "/metrics")
        assert "varvedb_replica_lag_versions 0.0" in metrics
        # the replica's own maintainer links what it follows: it answers for it
        status, done, _ = rh("POST", "/collections/docs/wait_indexed",
                             {"field": "title", "timeout": GUARD})
        assert status == 200 and done["indexed"] is True, done
        status, st, _ = rh("GET", "/collections/docs/index_status?field=title")
        assert status == 200 and st["field"] == "title" and st["unlinked"] == 0, st
        assert st["linked"] > 0
        # a version the leader has not made: a typed timeout naming the leader
        status, err, _ = rh("POST", "/collections/docs/count", {},
                            headers={"X-Varve-Min-Version": str(v + 1_000)})
        assert status == 504 and err["error"]["type"] == "VersionNotReachedError"
        assert srv.url in err["error"]["message"]
        lh.close()
        rh.close()
