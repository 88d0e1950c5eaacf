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

Under `serve --workers N` (workers.py) every process keeps its counts in
prometheus-client's multiprocess files (PROMETHEUS_MULTIPROC_DIR, in the
supervisor's private folder) and any worker's /metrics answers them summed
over the processes: requests and durations (counted where they arrive, at the
workers), threads busy, canceled reads. The database's figures are the
answering worker's (the same file at the same version; the maintainer's
passes are the writer's and absent), and the process collectors describe the
answering process alone.
"""
from __future__ import annotations

import os
import threading

from prometheus_client import (GC_COLLECTOR, PLATFORM_COLLECTOR, PROCESS_COLLECTOR,
                               CollectorRegistry, Counter, Gauge, Histogram,
                               disable_created_metrics, generate_latest)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily

from .. import __version__
from ..kernels import compile_log

# request durations: from a cached lookup (~100 µs) to a bulk load (tens of s)
BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
           10.0, 30.0, 60.0)


class Metrics:
    def __init__(self, db, count_requests: bool = True, replica=None):
        disable_created_metrics()     # no *_created series: one process, one start
        self.registry = CollectorRegistry(auto_describe=True)
        self.count_requests = count_requests
        self.requests = Counter("varvedb_http_requests", "HTTP requests answered",
                                ["route", "method", "status"], registry=self.registry)
        self.duration = Histogram("varvedb_http_request_duration_seconds",
                                  "Time from a request's arrival to its answer",
                                  ["route", "method", "status"], buckets=BUCKETS,
                                  registry=self.registry)
        # a read canceled at the timeout leaves this gauge when it stops
        self.busy = Gauge("varvedb_pool_threads_busy",
                          "Pool threads running a request's work now (a scrape counts itself)",
                          registry=self.registry, multiprocess_mode="livesum")
        self.canceled = Counter("varvedb_requests_canceled",
                                "Reads stopped at the server's timeout (their threads freed)",
                                registry=self.registry)
        if replica is not None:      # serve --replica-of URL: how far behind the leader
            Gauge("varvedb_replica_lag_versions", "Versions the leader has that this "
                  "replica has not applied yet (as of its last pull)",
                  registry=self.registry).set_function(lambda: replica.lag_versions)
            Gauge("varvedb_replica_lag_seconds", "Seconds between the leader's commit and "
                  "this replica's applying it, for the newest commit applied (0 when "
                  "caught up)", registry=self.registry).set_function(
                lambda: replica.lag_seconds)
        shared = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if shared:     # serve --workers N: the counts above, summed over the processes
            from prometheus_client.multiprocess import MultiProcessCollector
            self.registry = CollectorRegistry()
            MultiProcessCollector(self.registry, shared)
        self.registry.register(_DatabaseCollector(db))
        for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
            self.registry.register(collector)
        self._children: dict = {}
        self._lock = threading.Lock()

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        if not self.count_requests:
            return
        key = (route, method, status)
        pair = self._children.get(key)
        if pair is None:      # labels() costs a lock and a dict: once per key
            with self._lock:
                pair = (self.requests.labels(route, method, str(status)),
                        self.duration.labels(route, method, str(status)))
                self._children[key] = pair
        pair[0].inc()
        pair[1].observe(seconds)

    def render(self) -> str:
        return generate_latest(self.registry).decode()


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
