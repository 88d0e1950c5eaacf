"""`varvedb bench`: the comparison harness's commands, one subcommand per figure.

varvedb's CLI finds this group through the `varvedb.commands` entry point that
this distribution declares, and imports it only when `varvedb bench` runs; each
subcommand imports its module when it runs.
"""
from __future__ import annotations

import os

import click


@click.group()
def bench() -> None:
    """Measure varvedb against its peers on the same data (docs/bench.md)."""


class _CountOrFile(click.ParamType):
    """A number, or a path (a file of query vectors)."""
    name = "COUNT|FILE"

    def convert(self, value, param, ctx):
        if isinstance(value, int):
            return value
        try:
            return int(value)
        except ValueError:
            return str(value)


@bench.command()
@click.option("--rows", default=100_000, show_default=True,
              help="Rows (with --dataset: the first N train rows; default all of them).")
@click.option("--dim", default=128, show_default=True)
@click.option("--queries", default=1000, show_default=True, type=_CountOrFile(),
              help="Held-out queries; with --dataset a number (the first Q; default 1000 "
                   "or all the file has) or a file of query vectors (.npy, .fvecs, .bvecs).")
@click.option("--dataset", default=None, metavar="SPEC",
              help="Real data instead of the generator: an ann-benchmarks .hdf5, a .npy "
                   "(queries from NAME.query.npy, truth from NAME.truth.npy, else held out "
                   "and computed), .fvecs/.bvecs (with _query / _groundtruth.ivecs beside "
                   "it), or a named set: glove-50, minilm-debian (also clustered, uniform).")
@click.option("--truth", "truth_file", default=None, type=click.Path(dir_okay=False),
              help="With --dataset: a ground-truth file (.npy or .ivecs; row numbers).")
@click.option("--ab", default=None, metavar="ENGINES",
              help="A/B in one process instead of the worker processes: e.g. "
                   "varvedb,hnswlib,faiss (varvedb = the default HNSW(); varvedb:int8 and "
                   "varvedb:f32 = HNSW(quantize='int8') and HNSW(quantize=None)), "
                   "interleaved query by query; writes OUT/ab-<dataset>-<rows>x<dim>.*")
@click.option("--engines", default=None, metavar="ENGINES",
              help="Sweep mode: recall/QPS sweeps in fresh processes, e.g. varvedb:int8,"
                   "pgvector,faiss:ivfpq,lancedb:ivfpq (also varvedb, varvedb:f32, varvedb:ivfpq, hnswlib, "
                   "faiss, lancedb); writes OUT/sweep-<data>-<rows>x<dim>-<cap>[-cold].*")
@click.option("--memory-cap", default=None, metavar="SIZE",
              help="With --engines: each query worker and its servers run in a fresh cgroup "
                   "v1 memory group of SIZE (e.g. 64M, 1G; page cache counts).")
@click.option("--cold", is_flag=True,
              help="With --engines: sync and drop the page cache before the timed queries.")
@click.option("--probes", default="1,2,4,8,16,32,64", show_default=True,
              help="With --engines: the IVF engines' sweep (lists probed).")
@click.option("--lists", default=None, type=int,
              help="With --engines: IVF lists (default rows/1000, sqrt(rows) past 1M rows).")
@click.option("--pq-m", default=None, type=int,
              help="With --engines: PQ sub-vectors of the IVF-PQ engines (default dim/8).")
@click.option("--rerank", default=100, show_default=True,
              help="With --engines: candidates the IVF-PQ engines rerank exactly.")
@click.option("--pg-shared-buffers", default=None, metavar="SIZE",
              help="With --engines and --memory-cap: pgvector's shared_buffers (default a "
                   "quarter of the cap).")
@click.option("--keep-builds", default=None, metavar="DIR",
              help="With --engines: keep the built indexes in DIR and reuse them in a later "
                   "run with the same data and index settings (e.g. with and without a cap).")
@click.option("--rounds", default=5, show_default=True,
              help="With --ab: rounds over the queries at each ef; with --engines: "
                   "alternating rounds of every sweep point (default there 3).")
@click.option("--build-rounds", default=1, show_default=True,
              help="With --ab: builds of every engine, alternating (median, min–max).")
@click.option("--distribution", type=click.Choice(["clustered", "uniform"]),
              default="clustered", show_default=True)
@click.option("--metric", type=click.Choice(["l2", "cosine", "dot"]), default="l2",
              show_default=True)
@click.option("--dtype", type=click.Choice(["f32", "f16"]), default="f32", show_default=True,
              help="Vector elements. f16 rounds the generated values to half precision; "
                   "varvedb stores them as f16 and pgvector as halfvec, peers without f16 "
                   "get the same values as float32.")
@click.option("--m", default=16, show_default=True, help="HNSW links per node.")
@click.option("--ef-construction", default=200, show_default=True)
@click.option("--ef", default="10,40,100,200", show_default=True,
              help="ef sweep, comma-separated (--ab: default 10,20,40,80,120,200,300,400,600,800).")
@click.option("--runs", default=3, show_default=True, help="Median of N runs.")
@click.option("--peers", default="sqlite", show_default=True,
              help="Comma-separated peers (sqlite, pgvector, hnswlib, faiss, chromadb, "
                   "lancedb), or 'all'.")
@click.option("--varvedb/--no-varvedb", "with_varvedb", default=True, show_default=True,
              help="Measure varvedb too (--no-varvedb: only the named peers, e.g. to add "
                   "one peer to an earlier result).")
@click.option("--exact-queries", default=20, show_default=True,
              help="Queries timed for exact search (it is slow in some peers).")
@click.option("--commits", default=500, show_default=True, help="Durable 1-row commits timed.")
@click.option("--timeout", default=3600, show_default=True,
              help="Seconds one engine-run may take before it is stopped (0: no limit); "
                   "what it measured before is kept.")
@click.option("--query-budget", default=300, show_default=True,
              help="Seconds one timed query loop may take; past it, the figures are over the "
                   "queries answered so far (0: no limit).")
@click.option("--fresh", is_flag=True,
              help="Do not merge with an earlier result of the same config.")
@click.option("--out", default="bench-results", show_default=True)
@click.pass_context
def ann(ctx, rows, dim, queries, dataset, truth_file, ab, engines, memory_cap, cold, probes,
          lists, pq_m, rerank, pg_shared_buffers, keep_builds, rounds, build_rounds, distribution,
          metric, dtype, m, ef_construction, ef, runs, peers, with_varvedb, exact_queries,
          commits, timeout, query_budget, fresh, out) -> None:
    """Measure varvedb and its peers side by side on the same data.

    Writes OUT/bench-<distribution>-<rows>x<dim>[-f16].md, .json and .png (recall
    against QPS); with --dataset the data set's name replaces the distribution.
    A result with the same config as an earlier one merges with it: engines
    measured now replace theirs, the others are kept. --ab: every named engine
    in this one process instead (OUT/ab-<dataset>-<rows>x<dim>.*). --engines:
    recall/QPS sweeps, a fresh process per point, optionally under --memory-cap
    and --cold (OUT/sweep-*; docs/bench.md).
    """
    from varvedb.errors import VarveError

    from . import harness

    def given(name):
        return ctx.get_parameter_source(name) != click.core.ParameterSource.DEFAULT

    try:
        efs = [int(x) for x in ef.split(",")]
    except ValueError:
        raise click.BadParameter(f"{ef!r} is not a comma-separated list of numbers",
                                 param_hint="--ef") from None
    if engines is None and (memory_cap or cold):
        raise click.UsageError("--memory-cap and --cold are options of the sweep mode: "
                               "name the engines with --engines")
    if isinstance(queries, str) and dataset is None:
        raise click.BadParameter("a file of queries needs --dataset", param_hint="--queries")
    try:
        ds = None
        if ab is not None:
            from . import ab as ab_mode
            ab_mode.parse_engines(ab)     # a wrong name fails before the data is read
        if dataset is not None or ab is not None:
            from . import datasets
            spec = dataset or distribution
            ds = datasets.load(
                spec, os.path.join(out, "cache"), echo=click.echo,
                rows=rows if given("rows") or spec in datasets.GENERATED else None,
                queries=queries if isinstance(queries, int) and given("queries") else None,
                query_file=queries if isinstance(queries, str) else None,
                truth_file=truth_file, metric=metric if given("metric") else None, dim=dim)
            click.echo(f"data: {ds.source}")
        if ab is not None:
            ab_mode.run(ds, ab, out, m, ef_construction, efs if given("ef") else None,
                        rounds, build_rounds, echo=click.echo,
                        ivf={"lists": lists, "pq_m": pq_m, "rerank": rerank})
            return
        if engines is not None:
            from . import cgroup, sweep
            try:
                probe_list = [int(x) for x in probes.split(",")]
            except ValueError:
                raise click.BadParameter(f"{probes!r} is not a comma-separated list of "
                                         "numbers", param_hint="--probes") from None
            sweep.run(sweep.parse_engines(engines), rows, dim, queries, distribution, metric,
                      out, memory_cap=cgroup.parse_size(memory_cap) if memory_cap else None,
                      cold=cold, rounds=rounds if given("rounds") else 3, m=m,
                      ef_construction=ef_construction, ef=efs, probes=probe_list, lists=lists,
                      pq_m=pq_m, rerank=rerank,
                      pg_shared_buffers=(cgroup.parse_size(pg_shared_buffers)
                                         if pg_shared_buffers else None),
                      timeout=timeout, query_budget=query_budget, echo=click.echo, dataset=ds,
                      builds=keep_builds)
            return
        harness.run(rows, dim, queries, distribution, metric, m, ef_construction, efs, runs,
                    [p.strip() for p in peers.split(",") if p.strip()], out,
                    exact_queries=exact_queries, commits=commits, timeout=timeout,
                    query_budget=query_budget,
                    with_varvedb=with_varvedb, fresh=fresh, dtype=dtype, echo=click.echo,
                    dataset=ds)
    except VarveError as e:
        raise click.ClickException(str(e)) from None



@bench.command()
@click.option("--rounds", default=9, show_default=True,
              help="Alternating rounds per figure (medians and spread over them).")
@click.option("--commits", default=200, show_default=True, help="Durable commits per round.")
@click.option("--insert-rows", default=500, show_default=True,
              help="One-row inserts per round of the sustained-insert figure.")
@click.option("--only", default="", help="Comma-separated figures: get, upsert, search, "
                                         "overhead, commits-1, commits-8, inserts, cold "
                                         "(default: all).")
@click.option("--dataset", default="clustered", show_default=True,
              help="The overhead figure's vectors: clustered, uniform, glove-50, ...")
@click.option("--out", default=None, help="Also write the figures to this JSON file.")
def layers(rounds, commits, insert_rows, only, dataset, out) -> None:
    """The cost of the layers above the kernels and of the write path, each figure
    interleaved with a peer (SQLite, hnswlib) in one process. Run it on a real disk."""
    import json

    from . import layers
    figures = layers.run(rounds, commits, insert_rows,
                         only=[x.strip() for x in only.split(",") if x.strip()] or None,
                         echo=click.echo, dataset=dataset)
    if out:
        with open(out, "w") as f:
            json.dump(figures, f, indent=1, ensure_ascii=False)


@bench.command()
@click.option("--dataset", default="glove-50", show_default=True,
              help="A cosine set: glove-50, minilm-debian, or a generator (clustered, "
                   "uniform: made cosine).")
@click.option("--rows", default=100_000, show_default=True)
@click.option("--dim", default=128, show_default=True, help="The generator's dimension.")
@click.option("--queries", default=1000, show_default=True)
@click.option("--ef", "efs", default="10,20,40,80,160,320", show_default=True,
              help="The ef sweep (comma-separated).")
@click.option("--rounds", default=5, show_default=True)
@click.option("--engines", default="varvedb,hnswlib,plain,coded,edge,oracle",
              show_default=True, help="Comma-separated; coded/edge take :EPS, every "
                                      "walk but hnswlib's :nopf (no prefetch), varvedb "
                                      ":bfs or :rcm (its graph renumbered).")
@click.option("--out", default=None, help="Also write the figures to this JSON file.")
def walk(dataset, rows, dim, queries, efs, rounds, engines, out) -> None:
    """The graph walk alone against hnswlib's knn_query, and the walk with its
    neighbours' 1-bit codes beside the links (issue 32), interleaved query by query."""
    from varvedb.errors import OptionError

    from . import walk as module
    try:
        report = module.run(dataset, os.path.join("bench-results", "cache"), rows=rows,
                            dim=dim, queries=queries,
                            efs=[int(e) for e in efs.split(",")], rounds=rounds,
                            engines=[e.strip() for e in engines.split(",")],
                            echo=click.echo)
    except OptionError as e:
        raise click.ClickException(str(e)) from None
    if out:
        module.write(report, out)


def _summed(module, report: dict, out: str | None) -> None:
    """A figure's lines (module.summary: medians and min–max), and its JSON to `out`."""
    import json
    click.echo(module.summary(report))
    if out:
        with open(out, "w") as f:
            json.dump(report, f, indent=1)


@bench.command()
@click.option("--dataset", default="clustered", show_default=True,
              help="The rows and queries: clustered, uniform, glove-50, a .npy/.hdf5 file.")
@click.option("--rows", default=50_000, show_default=True)
@click.option("--queries", default=300, show_default=True)
@click.option("--shards", default="1,2,4", show_default=True, help="Shard counts, in turn.")
@click.option("--rounds", default=5, show_default=True)
@click.option("--ef", default=40, show_default=True)
@click.option("--out", default=None, help="Also write the figures to this JSON file.")
def sharded(dataset, rows, queries, shards, rounds, ef, out) -> None:
    """A collection sharded over Ray actors against one in-process collection:
    recall and the latency the fan-out adds, interleaved query by query."""
    from . import sharded as module
    _summed(module, module.run(dataset, rows, queries, [int(s) for s in shards.split(",")],
                               rounds, ef, echo=click.echo), out)


@bench.command()
@click.option("--rows", default=20_000, show_default=True)
@click.option("--dim", default=64, show_default=True)
@click.option("--queries", default=500, show_default=True)
@click.option("--rounds", default=3, show_default=True)
@click.option("--seconds", default=5.0, show_default=True, help="Each read window.")
@click.option("--threads", default=4, show_default=True, help="Read client threads.")
@click.option("--rate", default=500.0, show_default=True,
              help="Single-row commits per second scheduled on the leader.")
@click.option("--writers", default=8, show_default=True,
              help="Writer threads sharing the schedule (their commits share fsyncs).")
@click.option("--lag-seconds", default=10.0, show_default=True, help="Each write window.")
@click.option("--out", default=None, help="Also write the figures to this JSON file.")
def replica(rows, dim, queries, rounds, seconds, threads, rate, writers, lag_seconds,
            out) -> None:
    """A leader and one read replica (serve --replica-of) on this machine: read QPS
    split over both against the leader alone, and the replication lag under
    paced single-row commits."""
    from . import replica as module
    _summed(module, module.run(rows, dim, queries, rounds, seconds, threads, rate, writers,
                               lag_seconds, echo=click.echo), out)


@bench.command("ray")
@click.option("--rows", default=200_000, show_default=True)
@click.option("--dim", default=64, show_default=True)
@click.option("--rounds", default=3, show_default=True,
              help="Rounds, which CPU count goes first alternating.")
@click.option("--lists", default=256, show_default=True, help="The IVF-PQ build's lists.")
@click.option("--pq-m", default=16, show_default=True)
@click.option("--blocks", default=16, show_default=True, help="The ingest dataset's blocks.")
@click.option("--lance", is_flag=True,
              help="Also lance-ray's write_lance and create_index on the same rows.")
@click.option("--out", default=None, help="Also write the figures to this JSON file.")
def ray_(rows, dim, rounds, lists, pq_m, blocks, lance, out) -> None:
    """Parallel efficiency T1 / (2·T2) of Ray ingest (VarveDatasink) and of the Ray
    IVF-PQ build (build_index) with a local Ray of 1 and 2 CPUs."""
    from . import ray_scaling
    _summed(ray_scaling, ray_scaling.run(rows, dim, rounds, lists, pq_m, blocks, lance,
                                         echo=click.echo), out)


@bench.command("import")
@click.option("--rows", default=1_000_000, show_default=True)
@click.option("--dim", default=128, show_default=True)
@click.option("--rounds", default=3, show_default=True,
              help="Rounds, the engines' order alternating.")
@click.option("--out", default=None, help="Also write the figures to this JSON file.")
def import_(rows, dim, rounds, out) -> None:
    """Rows/s of `varvedb import` from .parquet and .npy against LanceDB's
    create_table from the same file (when lancedb is installed)."""
    import json

    from . import import_rate
    figures = import_rate.run(rows, dim, rounds)
    click.echo(import_rate.format_table(figures))
    if out:
        with open(out, "w") as f:
            json.dump(figures, f, indent=1)


@bench.command("commit-cpu")
@click.option("--rounds", default=7, show_default=True,
              help="Alternating rounds of the bare and the timed pass.")
@click.option("--commits", default=300, show_default=True, help="Durable commits per round.")
@click.option("--durability", type=click.Choice(["commit", "off"]), default="commit",
              show_default=True, help="off: the same path without its fdatasync (the "
                                      "code's own CPU, caches warm).")
@click.option("--shape", type=click.Choice(["narrow", "wide"]), default="narrow",
              show_default=True, help="narrow: an int and a 128-d vector; wide: two text "
                                      "fields, a json field, an int and a 384-d vector.")
@click.option("--out", default=None, help="Also write the figures to this JSON file.")
def commit_cpu(rounds, commits, durability, shape, out) -> None:
    """The thread CPU of one durable one-row commit (HNSW-indexed) outside its
    fdatasync, and the table of where it goes, step by step. Run it on a real disk."""
    import json

    from . import commit_cpu as cc
    figures = cc.run(None, rounds, commits, durability=durability, shape=shape)
    click.echo(cc.format_table(figures))
    if out:
        with open(out, "w") as f:
            json.dump(figures, f, indent=1, ensure_ascii=False)


@bench.command()
@click.option("--rows", default=100_000, show_default=True)
@click.option("--dim", default=128, show_default=True)
@click.option("--queries", default=1000, show_default=True, help="Held-out queries per round.")
@click.option("--rounds", default=9, show_default=True,
              help="Rounds over the queries (each interleaved query by query).")
@click.option("--m", default=16, show_default=True, help="HNSW links per node.")
@click.option("--ef-construction", default=200, show_default=True)
@click.option("--ef", default=100, show_default=True, help="ef_search on both sides.")
@click.option("--only", default="", help="Comma-separated figures: overhead, pgvector "
                                         "(default: both).")
@click.option("--profile-queries", default=300, show_default=True,
              help="Queries profiled when the overhead goal is missed (0: no profile).")
@click.option("--workdir", default=None, help="Folder for the files and the PostgreSQL "
                                              "server (default: a temporary one here).")
@click.option("--out", default=None, help="Also write the figures to this JSON file, and "
                                         "as markdown next to it (.md).")
def sql(rows, dim, queries, rounds, m, ef_construction, ef, only, profile_queries,
              workdir, out) -> None:
    """What db.sql() costs: the time it adds over the Python API for a filtered
    top-10 query, and the same query against PostgreSQL + pgvector, interleaved
    query by query in one process. Run it on a real disk."""
    from . import sql
    report = sql.run(rows, dim, queries, rounds, m, ef_construction, ef, workdir,
                     only=[x.strip() for x in only.split(",") if x.strip()] or None,
                     profile_queries=profile_queries, echo=click.echo)
    if out:
        click.echo(f"bench sql: wrote {out} and {sql.write(report, out)}")


@bench.command()
@click.option("--rows", default=100_000, show_default=True)
@click.option("--dim", default=128, show_default=True)
@click.option("--queries", default=1000, show_default=True, help="Held-out queries.")
@click.option("--rounds", default=5, show_default=True,
              help="Alternating rounds of the search and mixed figures.")
@click.option("--seconds", default=3.0, show_default=True,
              help="Length of one measurement (one engine, one thread count).")
@click.option("--threads", default="1,4,8", show_default=True, help="Client thread counts.")
@click.option("--m", default=16, show_default=True, help="HNSW links per node (both sides).")
@click.option("--ef-construction", default=200, show_default=True, help="Both sides.")
@click.option("--ef", default=100, show_default=True, help="ef_search on both sides.")
@click.option("--ingest-rows", default=50_000, show_default=True,
              help="Rows per ingest round (into a fresh indexed collection / table).")
@click.option("--batch", default=10_000, show_default=True, help="Rows per ingest request.")
@click.option("--write-batch", default=1000, show_default=True,
              help="Rows per batch of the mixed figure's writer.")
@click.option("--ingest-rounds", default=3, show_default=True)
@click.option("--write-rate", default=0.0, show_default=True,
              help="Rows/s of the mixed figure's writer on both sides (0: as fast as each "
                   "can).")
@click.option("--only", default="", help="Comma-separated figures: search, mixed, ingest "
                                         "(default: all).")
@click.option("--serve-args", default="", help="More arguments for `varvedb serve` "
                                               "(e.g. '--threads 8').")
@click.option("--pg/--no-pg", "with_pg", default=True, show_default=True,
              help="Measure PostgreSQL + pgvector too.")
@click.option("--profile", "profile_s", default=0.0, show_default=True,
              help="Seconds of py-spy samples of the server under the most clients (0: none).")
@click.option("--client", default="both", show_default=True,
              type=click.Choice(["http.client", "raw", "both", "wire", "all", "wrk"]),
              help="varvedb's load generator: stdlib http.client, pre-built requests on a "
                   "raw socket (the least client-side Python), both as separate sides, "
                   "wire (psycopg over `serve --pg`, the same calls as pgvector's), or all; "
                   "wrk: C load generators on both sides, wrk for varvedb and pgbench for "
                   "pgvector, threads being their connections (search figure only).")
@click.option("--dataset", default=None, metavar="SPEC",
              help="Real vectors instead of the clustered generator (as `bench ann "
                   "--dataset`: glove-50, a .npy/.hdf5 file, ...); --rows takes the first N.")
@click.option("--ladder-rounds", default=3, show_default=True,
              help="Rounds of the one-request ladder (each level of the server's stack, "
                   "interleaved; 0: none).")
@click.option("--quick", is_flag=True, help="Tiny sizes (a smoke test of the harness).")
@click.option("--workdir", default=None, help="Folder for the file and the PostgreSQL "
                                              "server (default: a temporary one here). "
                                              "A real disk: tmpfs is refused.")
@click.option("--workers", default="", metavar="W,W",
              help="Measure the search against `serve --workers W` for each W (e.g. 1,2), "
                   "each server on its own copy of the file, alternating with the others.")
@click.option("--out", default=None, help="Also write the figures to this JSON file, and "
                                         "as markdown next to it (.md).")
def server(rows, dim, queries, rounds, seconds, threads, m, ef_construction, ef,
                 ingest_rows, batch, write_batch, ingest_rounds, write_rate, only, serve_args,
                 with_pg,
                 profile_s, client, dataset, ladder_rounds, quick, workdir, workers,
                 out) -> None:
    """`varvedb serve` against PostgreSQL + pgvector over TCP on 127.0.0.1: search QPS
    and p50/p99 at 1, 4 and 8 client threads, ingest rows/s (JSON, Arrow, .npy against
    binary COPY) and search under a writer, the engines alternating round by round."""
    import shlex

    from . import server, sql
    if quick:
        rows, dim, queries, rounds, seconds = 2000, 16, 50, 2, 0.15
        ingest_rows, batch, write_batch, ingest_rounds = 1000, 250, 100, 1
        m, ef_construction, ladder_rounds = 8, 40, min(ladder_rounds, 1)
    try:
        report = server.run(
            rows, dim, queries, rounds, seconds,
            tuple(int(t) for t in threads.split(",") if t.strip()), m, ef_construction, ef,
            ingest_rows, batch, write_batch, ingest_rounds,
            only=[x.strip() for x in only.split(",") if x.strip()] or None,
            serve_args=shlex.split(serve_args), workdir=workdir, with_pg=with_pg,
            profile_s=profile_s, client=client, ladder_rounds=ladder_rounds,
            write_rate=write_rate, dataset=dataset,
            workers=tuple(int(w) for w in workers.split(",") if w.strip()), echo=click.echo)
    except server.BenchError as e:
        raise click.ClickException(str(e)) from None
    click.echo(server.markdown(report))
    if out:
        click.echo(f"bench server: wrote {out} and {sql.write(report, out, server.markdown)}")


@bench.command()
@click.option("--rows", default=100_000, show_default=True, help="Vacuum: rows with HNSW.")
@click.option("--dim", default=128, show_default=True)
@click.option("--updates", default=3, show_default=True, help="Vacuum: updates of every row.")
@click.option("--queries", default=300, show_default=True)
@click.option("--rounds", default=5, show_default=True,
              help="Alternating rounds of the QPS and get() figures.")
@click.option("--docs", default=100_000, show_default=True,
              help="Compression: documents of text + json (package description paragraphs).")
@click.option("--corpus", default=None, help="Compression: a JSONL of {id, body, summary}.")
@click.option("--backup-mb", default=1024, show_default=True, help="Backup: the file's size.")
@click.option("--writer-seconds", default=5.0, show_default=True,
              help="Backup: how long the writer commits before the backup starts.")
@click.option("--out", default="bench-results", show_default=True,
              help="A folder on a real disk (the figures are file sizes and fsyncs).")
def history(rows, dim, updates, queries, rounds, docs, corpus, backup_mb,
                  writer_seconds, out) -> None:
    """Vacuum, compression and backup: sizes and times against a fresh load and SQLite."""
    from varvedb.errors import VarveError

    from . import history
    try:
        history.run(out, rows=rows, dim=dim, updates=updates, queries=queries, rounds=rounds,
                    docs=docs, corpus=corpus, backup_mb=backup_mb,
                    writer_seconds=writer_seconds, echo=click.echo)
    except VarveError as e:
        raise click.ClickException(str(e)) from None


@bench.command()
@click.option("--rows", default=100_000, show_default=True, help="Rows with HNSW on main.")
@click.option("--dim", default=128, show_default=True)
@click.option("--writes", default=1000, show_default=True, help="Single-row updates on the branch.")
@click.option("--out", default="bench-results", show_default=True,
              help="A folder on a real disk (the figures are fsyncs and file bytes).")
def branch(rows, dim, writes, out) -> None:
    """Fork, writes on the branch, merge: time and bytes added."""
    from . import branch
    branch.run(out, rows=rows, dim=dim, writes=writes, echo=click.echo)


@bench.command()
@click.option("--docs", default=10_000, show_default=True)
@click.option("--dim", default=384, show_default=True)
@click.option("--rounds", default=5, show_default=True,
              help="Alternating rounds (fresh stores each).")
@click.option("--queries", default=100, show_default=True,
              help="Filtered similarity_search calls a round.")
@click.option("--no-peers", is_flag=True, help="varvedb only (no Chroma).")
@click.option("--workdir", default=None, help="Where the stores' files go (a real disk).")
@click.option("--out", default="bench-results/langchain-10000", show_default=True,
              help="Writes OUT.md and OUT.json.")
def langchain(docs, dim, rounds, queries, no_peers, workdir, out) -> None:
    """The LangChain store against Chroma's (langchain-chroma): add_documents and a
    filtered similarity_search, same documents, precomputed vectors."""
    from . import langchain
    langchain.run(out, n=docs, dim=dim, rounds=rounds, queries=queries,
                  peers=not no_peers, workdir=workdir, echo=click.echo)


@bench.command()
@click.option("--corpus", default=None,
              help="A JSONL file of {id, body, summary} (default: the Debian package "
                   "descriptions of this machine's package lists).")
@click.option("--limit", default=0, show_default=True,
              help="Only the first N documents (0: all).")
@click.option("--queries", default=200, show_default=True, help="Queries per class.")
@click.option("--rounds", default=7, show_default=True,
              help="Rounds over the queries (each interleaved query by query).")
@click.option("--build-rounds", default=3, show_default=True,
              help="Alternating rounds of the build figure (fresh files each).")
@click.option("--hybrid-queries", default=500, show_default=True,
              help="Packages of the labelled set (summary -> package).")
@click.option("--embedder", default="onnx", show_default=True,
              help="Embedder spec of the hybrid figure's vector leg ('': no vector leg).")
@click.option("--hybrid-docs", default=5000, show_default=True,
              help="Documents of the sample the vector leg and the fusion run on.")
@click.option("--profile-queries", default=200, show_default=True,
              help="Queries profiled in a class that misses its goal (0: no profiles, "
                   "the build's included).")
@click.option("--seed", default=0, show_default=True, help="Seed of the query classes.")
@click.option("--any-queries", default=0, show_default=True,
              help="Questions in plain words (package summaries): match='any' against "
                   "FTS5's OR query, latency and top-10 overlap (0: not run).")
@click.option("--varvedb/--no-varvedb", "with_varvedb", default=True, show_default=True,
              help="Measure varvedb too (--no-varvedb: FTS5 alone).")
@click.option("--workdir", default=None, help="Folder for the files (default: a temporary "
                                              "one here). Use a real disk, never tmpfs.")
@click.option("--out", default=None, help="Also write the figures to this JSON file, and "
                                         "as markdown next to it (.md).")
def text(corpus, limit, queries, rounds, build_rounds, hybrid_queries, embedder,
               hybrid_docs, profile_queries, seed, any_queries, with_varvedb, workdir,
               out) -> None:
    """Full-text search against SQLite FTS5 on the same corpus, in one process: build
    time, index bytes, latency per query class (interleaved query by query), top-10
    overlap with FTS5's ranking, and recall@10 of text, vectors and their fusion on a
    labelled set (a package's summary -> the package). Run it on a real disk."""
    from varvedb.errors import VarveError

    from . import text
    try:
        report = text.run(corpus, limit or None, queries, rounds, build_rounds,
                          hybrid_queries, seed, workdir, with_varvedb, embedder or None,
                          hybrid_docs, profile_queries, any_queries, echo=click.echo)
    except VarveError as e:
        raise click.ClickException(str(e)) from None
    if out:
        click.echo(f"bench text: wrote {out} and {text.write(report, out)}")
