"""`varvedb bench replica`: a leader `varvedb serve` and one `serve --replica-of`
on this machine, both over TCP on 127.0.0.1 (issue 33's figure).

The leader's file holds `items` (clustered vectors, l2, an HNSW graph linked
and checkpointed, as the server bench builds it) and an empty `writes`; the
replica is seeded from the leader's backup when it starts.

* reads: `threads` client threads (this process; pre-built search requests on
  raw sockets, the server bench's VarveSearch) for `seconds`, all against the
  leader, then the same number split between the leader and the replica
  (every other thread); which goes first alternates by round. QPS of each and
  the per-round ratio split / alone. On one 2-core machine both servers and
  the clients share the cores: the ratio says what a second process of the
  same file costs and buys here, not what a second machine would.
* lag: `writers` threads, each with its own kept-alive connection to the
  leader, send single-row commits (POST /collections/writes/items, one JSON
  row {"n": int, "note": short text}: one commit each) on one shared schedule
  of `rate` commits/s: commit n is due at t0 + n / rate and the next free
  writer takes it. The leader's commits made together share one fdatasync
  (group commit), which is how one file reaches that rate where a single
  writer waits out a sync per commit. An observer thread asks the replica for
  a count at version seen + 1 (X-Varve-Min-Version: the replica answers as
  soon as it has applied that version) and notes the version each answer
  carries and when it came. A commit's lag: from its acknowledgement reaching
  its writer to the first replica answer at its version (the X-Varve-Version
  its answer carried: its own, or a later one made with it) or later (negative
  where the replica had it before the acknowledgement arrived), resolved to
  one observer round trip. Per round: p50, p99 and max, and the commits/s
  reached (acknowledged commits over the schedule's window).

Each figure: the median and min-max over rounds; the load average before and
after.
"""
from __future__ import annotations

import itertools
import json
import os
import shutil
import tempfile
import threading
import time

import numpy as np

from varvedb import demo_data

from .server import (BenchError, RawHttp, VarveSearch, VarveServer, _check_disk, _stats,
                     build_file, measure, quiesce)

WRITES = "writes"
MIN_VERSION = "X-Varve-Min-Version"


class Split:
    """Client connections spread over several servers' sides, in turn."""

    def __init__(self, sides: list):
        self.sides, self._next = sides, 0

    def connect(self):
        side = self.sides[self._next % len(self.sides)]
        self._next += 1
        return side, side.connect()

    def call(self, c, i: int):
        return c[0].call(c[1], i)

    def close(self, c) -> None:
        c[0].close(c[1])

    def pids(self) -> list[int]:
        return [p for s in self.sides for p in s.pids()]


def _version(head: bytes) -> int:
    at = head.find(b"\r\nx-varve-version:")
    if at < 0:
        raise BenchError(f"an answer without X-Varve-Version: {head[:300]!r}")
    stop = head.find(b"\r\n", at + 2)
    return int(head[at + 18:stop if stop > 0 else len(head)])


def lag_round(leader: VarveServer, replica: VarveServer, rate: float, writers: int,
              seconds: float) -> dict:
    """One window of paced single-row commits on the leader, and the replica's lag."""
    total = int(rate * seconds)
    host = f"Host: 127.0.0.1:{leader.port}\r\n"
    requests = []
    for n in range(total):
        body = json.dumps([{"n": n, "note": f"commit {n}"}]).encode()
        requests.append(f"POST /collections/{WRITES}/items HTTP/1.1\r\n{host}"
                        f"Content-Type: application/json\r\nContent-Length: {len(body)}"
                        "\r\n\r\n".encode() + body)
    acked = np.full(total, np.nan)
    versions = np.zeros(total, np.int64)
    seen_at: list[float] = []
    seen: list[int] = []
    errors: list[BaseException] = []
    written = threading.Event()
    ticket = itertools.count()
    clock = time.perf_counter
    conns = [RawHttp(leader.port) for _ in range(writers)]
    watch = RawHttp(replica.port)
    start = replica.ok("GET", "/health")["version"]
    t0 = clock() + 0.2          # every thread started before the first is due

    def write(c: RawHttp) -> None:
        try:
            while not errors and (n := next(ticket)) < total:
                ahead = t0 + n / rate - clock()
                if ahead > 0:
                    time.sleep(ahead)
                status, body = c.exchange(requests[n])
                if status != 201:
                    raise BenchError(f"a commit answered {status}: {body[:300]!r}")
                acked[n], versions[n] = clock(), _version(c.head)
        except BaseException as e:      # noqa: BLE001 - reported by the caller
            errors.append(e)

    def observe() -> None:
        head = (f"POST /collections/{WRITES}/count HTTP/1.1\r\nHost: 127.0.0.1:"
                f"{replica.port}\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
                f"{MIN_VERSION}: ")
        at = start
        try:
            while not errors and not (written.is_set() and at >= versions.max()):
                status, body = watch.exchange(f"{head}{at + 1}\r\n\r\n{{}}".encode())
                if status == 504:       # no commit came within the replica's wait
                    continue
                if status != 200:
                    raise BenchError(f"the replica answered {status}: {body[:300]!r}")
                at = _version(watch.head)
                seen_at.append(clock())
                seen.append(at)
        except BaseException as e:      # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=write, args=(c,), daemon=True) for c in conns]
    observer = threading.Thread(target=observe, daemon=True)
    observer.start()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    written.set()
    observer.join()
    for c in (*conns, watch):
        c.close()
    if errors:
        raise errors[0]
    # the first answer at each commit's version or later (seen only grows)
    first = np.searchsorted(np.asarray(seen), versions, side="left")
    lag_ms = (np.asarray(seen_at)[first] - acked) * 1e3
    reached = float(total / (np.nanmax(acked) - t0))
    return {"commits": total, "commits_per_s": round(reached, 1),
            "p50_ms": round(float(np.percentile(lag_ms, 50)), 2),
            "p99_ms": round(float(np.percentile(lag_ms, 99)), 2),
            "max_ms": round(float(lag_ms.max()), 2), "replica_answers": len(seen)}


def run(rows: int = 20_000, dim: int = 64, queries: int = 500, rounds: int = 3,
        seconds: float = 5.0, threads: int = 4, rate: float = 500.0, writers: int = 8,
        lag_seconds: float = 10.0, ef: int = 40, echo=print) -> dict:
    import varvedb as vv
    workdir = tempfile.mkdtemp(prefix="varvedb-replica-", dir=os.getcwd())
    report = {"config": {"rows": rows, "dim": dim, "queries": queries, "rounds": rounds,
                         "seconds": seconds, "threads": threads, "rate": rate,
                         "writers": writers, "lag_seconds": lag_seconds, "ef": ef,
                         "workdir_fs": _check_disk(workdir), "cpus": os.cpu_count(),
                         "commit": "one row {n, note} as JSON: POST /collections/writes/items"},
              "load_before": os.getloadavg()}
    leader = replica = None
    try:
        ds = demo_data.make(rows, dim, queries)
        path = os.path.join(workdir, "leader.varve")
        echo(f"bench replica: building {rows:,} × {dim} with its graph")
        build_file(path, ds.vectors, ds.queries, 16, 100, ef)
        with vv.connect(path) as db:
            db.create_collection(WRITES, {"n": "int", "note": "text"})
        leader = VarveServer(path).start()
        replica = VarveServer(os.path.join(workdir, "replica.varve"),
                              ["--replica-of", f"http://127.0.0.1:{leader.port}"]).start()
        alone = VarveSearch(leader, ds.queries, ef, client="raw")
        split = Split([alone, VarveSearch(replica, ds.queries, ef, client="raw")])
        for side in (alone, split):     # untimed: both servers' first searches
            measure(side, threads, 1.0, queries)
        reads = {"alone": [], "split": []}
        lags = []
        for r in range(rounds):
            for name in (("alone", "split") if r % 2 == 0 else ("split", "alone")):
                side = alone if name == "alone" else split
                quiesce(split.pids)
                reads[name].append(measure(side, threads, seconds, queries, offset=r * 97))
            quiesce(split.pids)
            lags.append(lag_round(leader, replica, rate, writers, lag_seconds))
            echo(f"bench replica: round {r + 1}: alone {reads['alone'][-1]['qps']:,.0f} qps, "
                 f"split {reads['split'][-1]['qps']:,.0f} qps; {lags[-1]}")
        report["reads"] = {
            "leader_alone_qps": _stats([x["qps"] for x in reads["alone"]]),
            "split_qps": _stats([x["qps"] for x in reads["split"]]),
            "split_over_alone": _stats([s["qps"] / a["qps"] for s, a in
                                        zip(reads["split"], reads["alone"])]),
            "rounds": reads}
        report["lag"] = {k: _stats([x[k] for x in lags])
                         for k in ("commits_per_s", "p50_ms", "p99_ms", "max_ms")}
        report["lag"]["rounds"] = lags
    finally:
        for srv in (replica, leader):
            if srv is not None:
                srv.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    report["load_after"] = os.getloadavg()
    return report


def summary(report: dict) -> str:
    """The figures as lines: median [min–max] over rounds."""
    def mm(s: dict, fmt: str) -> str:
        return f"{s['median']:{fmt}} [{s['min']:{fmt}}–{s['max']:{fmt}}]"
    c, rd, lg = report["config"], report["reads"], report["lag"]
    return "\n".join([
        f"replica bench: {c['rows']:,} × {c['dim']}, {c['rounds']} rounds, load "
        f"{report['load_before'][0]:.2f} → {report['load_after'][0]:.2f}",
        f"reads, {c['threads']} client threads: leader alone {mm(rd['leader_alone_qps'], ',.0f')}"
        f" qps; split over leader + replica {mm(rd['split_qps'], ',.0f')} qps; ratio "
        f"{mm(rd['split_over_alone'], '.2f')}",
        f"lag, {c['writers']} writers at {c['rate']:g} single-row commits/s scheduled: reached "
        f"{mm(lg['commits_per_s'], ',.0f')} commits/s; p50 {mm(lg['p50_ms'], '.1f')} ms, p99 "
        f"{mm(lg['p99_ms'], '.1f')} ms, max {mm(lg['max_ms'], '.1f')} ms"])
