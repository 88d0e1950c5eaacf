"""GET /metrics: Prometheus's text format, with its conventional names
(varvedb_ prefix, base units, _total counters).

Request counts and durations are kept as requests end, the pool threads
busy as work starts and stops; what the database
holds (documents per collection, file bytes, memory bytes, the version), how
far each deferred index is behind (rows committed and not yet indexed), the
maintainer's passes, the vacuums and backups done, and the numba
specialisations compiled in the process are read when the metrics are
scraped; prometheus-client's own process, platform and GC collectors are
there too (process_cpu_seconds_total, process_resident_memory_bytes, ...).

Under `serve --workers N` (workers.py) every process keeps its counts in a
small file of float64 values of its own, mapped into memory, in the
supervisor's private folder (VARVEDB_METRICS_DIR), and any worker's /metrics
answers them summed over the processes: requests and durations (counted where
they arrive, at the workers), threads busy, canceled reads. The database's
figures are the answering worker's (the same file at the same version; the
maintainer's passes are the writer's and absent), and the process collectors
describe the answering process alone.

The counts cost a request two additions to that array (`Counts`), not
prometheus-client's metric objects (a lock and a value each, and under its
multiprocess mode a file write per value): they become metric families only
when /metrics is scraped (`_RequestCollector`). One process keeps the same
array in its own memory.
"""
from __future__ import annotations

import json
import mmap
import os
import secrets
import threading
from bisect import bisect_left
from functools import partial

import numpy as np
from prometheus_client import (GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR,
                               CollectorRegistry, Gauge, disable_created_metrics,
                               generate_latest)
from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                    HistogramMetricFamily, InfoMetricFamily)
from prometheus_client.utils import floatToGoString

from .. import __version__
from ..kernels import compile_log

# request durations: from a cached lookup (~100 µs) to a bulk load (tens of s)
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
           10.0, 30.0, 60.0)
_BOUNDS = (*BUCKETS, float("inf"))
_LE = [floatToGoString(b) for b in _BOUNDS]
ENV = "VARVEDB_METRICS_DIR"      # serve --workers N: where each process's counts are
# a process's array: [works started, works ended, reads canceled], then per
# (route, method, status) its durations' sum and its count in each bucket
_STARTED, _ENDED, _CANCELED, _HEAD = 0, 1, 2, 3
_KEY = 1 + len(_BOUNDS)
_FIRST = 4096                    # float64 values at first (32 KiB); doubled when full


class Counts:
    """One process's request counts: a float64 array, in memory or (`folder`)
    in a file of its own there, mapped, that other processes read
    (`read_folder`). Each request adds to it under one lock; a new (route,
    method, status) is given its place first, and the places are written next
    to the array (keys_*.json) before it is counted."""

    def __init__(self, folder: str | None = None):
        self.lock = threading.Lock()
        self.folder = folder
        self.places: dict[tuple, int] = {}
        self._used = _HEAD
        self._file = self._map = None
        if folder is not None:
            self.stem = f"{os.getpid()}_{secrets.token_hex(4)}"
            self._file = open(os.path.join(folder, f"live_{self.stem}.f64"), "w+b")
        self._size = 0
        self._grow(_FIRST)

    def _grow(self, size: int) -> None:
        if self._file is None:
            buf = bytearray(size * 8)
            if self._size:
                buf[:self._size * 8] = self.values.cast("B")
            self.values = memoryview(buf).cast("d")
        else:
            self._file.truncate(size * 8)      # zeros; the values there are kept
            if self._map is not None:
                self.values.release()
                self._map.close()
            self._map = mmap.mmap(self._file.fileno(), size * 8)
            self.values = memoryview(self._map).cast("d")
        self._size = size

    def place(self, key: tuple) -> int:
        """Where `key`'s (route, method, status) values begin."""
        with self.lock:
            at = self.places.get(key)
            if at is None:
                at = self._used
                if at + _KEY > self._size:
                    self._grow(self._size * 2)
                self._used += _KEY
                if self.folder is not None:
                    keys = os.path.join(self.folder, f"keys_{self.stem}.json")
                    with open(keys + ".tmp", "w") as f:
                        json.dump([[*k, self.places[k]] for k in self.places] +
                                  [[*key, at]], f)
                    os.replace(keys + ".tmp", keys)
                self.places[key] = at
            return at

    def observe(self, at: int, seconds: float) -> None:
        i = at + 1 + bisect_left(_BOUNDS, seconds)
        with self.lock:
            values = self.values
            values[at] += seconds
            values[i] += 1.0

    def add(self, what: int) -> None:
        with self.lock:
            self.values[what] += 1.0

    def read(self) -> tuple[dict, float, float]:
        """This process's ({key: its sum and bucket counts}, busy, canceled)."""
        with self.lock:
            values = np.array(self.values[:self._used])
            places = dict(self.places)
        return _totals([(places, values, True)])

    def read_folder(self) -> tuple[dict, float, float]:
        """The same, summed over every process's file in the folder (a dead one's
        threads busy left out: mark_dead)."""
        found = []
        for name in os.listdir(self.folder):
            if not name.endswith(".f64"):
                continue
            stem = name[5:-4]
            try:
                with open(os.path.join(self.folder, name), "rb") as f:
                    values = np.frombuffer(f.read(), np.float64)
            except FileNotFoundError:       # marked dead as it was listed
                try:
                    with open(os.path.join(self.folder, "dead_" + name[5:]), "rb") as f:
                        values = np.frombuffer(f.read(), np.float64)
                except FileNotFoundError:
                    continue
                name = "dead_" + name[5:]
            try:
                with open(os.path.join(self.folder, f"keys_{stem}.json")) as f:
                    places = {tuple(k[:3]): k[3] for k in json.load(f)}
            except FileNotFoundError:       # nothing counted yet
                places = {}
            found.append((places, values, name.startswith("live_")))
        return _totals(found)


def _totals(found) -> tuple[dict, float, float]:
    keys: dict = {}
    busy = canceled = 0.0
    for places, values, live in found:
        if len(values) < _HEAD:
            continue
        if live:
            busy += values[_STARTED] - values[_ENDED]
        canceled += values[_CANCELED]
        for key, at in places.items():
            if at + _KEY <= len(values):
                keys[key] = keys.get(key, 0) + values[at:at + _KEY]
    return keys, busy, canceled


def mark_dead(folder: str, pid: int) -> None:
    """A process of `serve --workers N` that has ended: its counts stay in the
    sums, its threads busy leave them."""
    for name in os.listdir(folder):
        if name.startswith(f"live_{pid}_") and name.endswith(".f64"):
            os.replace(os.path.join(folder, name), os.path.join(folder, "dead_" + name[5:]))


class Metrics:
    def __init__(self, db, count_requests: bool = True, replica=None):
        disable_created_metrics()     # no *_created series: one process, one start
        self.registry = CollectorRegistry(auto_describe=True)
        self.count_requests = count_requests
        folder = os.environ.get(ENV) or None
        self.counts = Counts(folder)
        self.registry.register(_RequestCollector(self.counts))
        if replica is not None:      # serve --replica-of URL: how far behind the leader
            Gauge("varvedb_replica_lag_versions", "Versions the leader has that this "
                  "replica has not applied yet (as of its last pull)",
                  registry=self.registry).set_function(lambda: replica.lag_versions)
            Gauge("varvedb_replica_lag_seconds", "Seconds between the leader's commit and "
                  "this replica's applying it, for the newest commit applied (0 when "
                  "caught up)", registry=self.registry).set_function(
                lambda: replica.lag_seconds)
        self.registry.register(_DatabaseCollector(db))
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            self.registry.register(collector)
        self._places = self.counts.places
        # a pool thread's work on a request: started, ended (busy meanwhile), canceled
        self.work_started = partial(self.counts.add, _STARTED)
        self.work_ended = partial(self.counts.add, _ENDED)
        self.work_canceled = partial(self.counts.add, _CANCELED)

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        """A request answered: its route template, method, status and duration."""
        if not self.count_requests:
            return
        key = (route, method, status)
        at = self._places.get(key)
        if at is None:
            at = self.counts.place(key)
        i = at + 1 + bisect_left(_BOUNDS, seconds)       # Counts.observe, inlined
        counts = self.counts
        with counts.lock:
            values = counts.values
            values[at] += seconds
            values[i] += 1.0

    def render(self) -> str:
        return generate_latest(self.registry).decode()


class _RequestCollector:
    """The request counts (Counts) as prometheus' families, at each scrape."""

    def __init__(self, counts: Counts):
        self.counts = counts

    def describe(self):
        return []

    def collect(self):
        counts = self.counts
        keys, busy, canceled = counts.read() if counts.folder is None else \
            counts.read_folder()
        labels = ["route", "method", "status"]
        requests = CounterMetricFamily("varvedb_http_requests", "HTTP requests answered",
                                       labels=labels)
        duration = HistogramMetricFamily("varvedb_http_request_duration_seconds",
                                         "Time from a request's arrival to its answer",
                                         labels=labels)
        for (route, method, status), values in sorted(keys.items(), key=str):
            names = [route, method, str(status)]
            cumulative = np.cumsum(values[1:])
            requests.add_metric(names, float(cumulative[-1]))
            duration.add_metric(names, list(zip(_LE, cumulative.tolist())),
                                float(values[0]))
        yield requests
        yield duration
        # a read canceled at the timeout leaves this gauge when it stops
        yield GaugeMetricFamily("varvedb_pool_threads_busy", "Pool threads running a "
                                "request's work now (a scrape counts itself)", value=busy)
        yield CounterMetricFamily("varvedb_requests_canceled", "Reads stopped at the "
                                  "server's timeout (their threads freed)", value=canceled)


class _DatabaseCollector:
    """The database's own figures, read at each scrape."""

    def __init__(self, db):
        self.db = db

    def describe(self):
        return []

    def collect(self):
        db = self.db
        info = InfoMetricFamily("varvedb_build", "varvedb's version")
        info.add_metric([], {"version": __version__})
        yield info
        # after `serve`'s warm, any rise here is a request that waited on numba
        compiled = CounterMetricFamily("varvedb_kernel_compilations",
                                       "numba specialisations compiled in this process")
        compiled.add_metric([], compile_log.compilation_count())
        yield compiled
        engine = db.engine
        if engine.closed:
            return
        version = GaugeMetricFamily("varvedb_version", "The newest committed version")
        version.add_metric([], engine.visible)
        yield version
        for name, value, what in (("varvedb_vacuums", engine.vacuums, "Vacuums done"),
                                  ("varvedb_backups", engine.backups, "Backups taken")):
            done = CounterMetricFamily(name, what + " since the file was opened")
            done.add_metric([], value)
            yield done
        if engine.maintainer is not None:
            passes = CounterMetricFamily("varvedb_maintainer_passes",
                                         "Passes of the background indexer (it makes none "
                                         "while nothing is behind)")
            passes.add_metric([], engine.maintainer.passes)
            yield passes
        docs = GaugeMetricFamily("varvedb_documents", "Live documents per collection",
                                 labels=["collection"])
        versions = GaugeMetricFamily("varvedb_row_versions",
                                     "Row versions held per collection (live and dead)",
                                     labels=["collection"])
        memory = GaugeMetricFamily("varvedb_memory_bytes",
                                   "Bytes of the arrays the engine holds (columns, vector "
                                   "graphs, text indexes; mapped file pages included)",
                                   labels=["collection", "part"])
        behind = GaugeMetricFamily("varvedb_index_unindexed_rows",
                                   "Committed row versions a deferred index (a graph, IVF "
                                   "lists, a full-text index) has not indexed yet; searches "
                                   "scan them exactly meanwhile",
                                   labels=["collection", "field"])
        sess = db.session()
        for name in db.collections():
            try:
                coll = sess.collection(name)
                docs.add_metric([name], coll.count())
                t = coll.table
                status = [coll.index_status(f) for f in (*t.vector_indexes, *t.text_indexes)]
            except Exception:     # dropped between the listing and the count
                continue
            versions.add_metric([name], t.n)
            for part, n in t.memory_bytes().items():
                memory.add_metric([name, part], n)
            for st in status:
                behind.add_metric([name, st["field"]], st["unlinked"])
        yield docs
        yield versions
        yield memory
        yield behind
        if db.path is not None:
            size = GaugeMetricFamily("varvedb_file_bytes", "Size of the database file")
            try:
                size.add_metric([], os.path.getsize(db.path))
            except OSError:
                return
            yield size
