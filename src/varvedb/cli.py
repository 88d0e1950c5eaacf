"""The `varvedb` command: the API's verbs for the shell."""
from __future__ import annotations

import json
import os
import sys

import click

import varvedb as vv


@click.group()
@click.version_option(vv.__version__, prog_name="varvedb")
def main() -> None:
    """varvedb: an embedded, single-file, versioned document + vector database."""


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def info(file: str, as_json: bool) -> None:
    """Collections, rows, version and size of FILE."""
    with vv.connect(file, readonly=True) as db:
        eng = db._engine
        sb = eng.log.file.superblock
        out = {
            "file": file, "bytes": os.path.getsize(file), "version": db.version,
            "oldest_version": eng.oldest_version(),       # > 1: a vacuum dropped the rest
            "format_version": eng.log.file.format_version,
            "checkpoint_version": sb.checkpoint_version if sb else None,
            "collections": {},
        }
        for name in db.collections():
            coll = db[name]
            t = coll._table
            out["collections"][name] = {
                "documents": coll.count(), "row_versions": t.n,
                "id": t.schema.id_kind,
                "fields": {n: f.to_dict() for n, f in t.schema.fields.items()},
                # bytes per stored vector and per graph node, by vector field
                "vectors": {n: coll.vector_memory(n) for n in t.schema.vector_fields},
            }
    if as_json:
        click.echo(json.dumps(out, indent=2))
        return
    kept = (f" (history kept from version {out['oldest_version']})"
            if out["oldest_version"] > 1 else "")
    click.echo(f"{file}: {out['bytes'] / 2**20:.1f} MiB, version {out['version']}{kept}, "
               f"checkpoint at version {out['checkpoint_version']}, "
               f"format {out['format_version']}")
    for name, c in out["collections"].items():
        fields = ", ".join(f"{n} {_describe(f)}" for n, f in c["fields"].items())
        click.echo(f"  {name}: {c['documents']:,} documents ({c['row_versions']:,} row "
                   f"versions); id {c['id']}; {fields}")
        for n, m in c["vectors"].items():
            graph = (f", index {m['graph_bytes_per_vector']:g} B/vector"
                     if m["graph_bytes"] else "")
            click.echo(f"    {n}: {m['bytes_per_vector']} B/vector ({m['dtype']}){graph}")


def _describe(f: dict) -> str:
    if f["kind"] == "vector":
        ix = f.get("index")
        params = "" if not ix else " [" + " ".join(
            [ix["kind"]] + [f"{k}={v}" for k, v in ix.items()
                            if k in ("m", "quantize", "pq_m", "lists", "nprobe")]) + "]"
        return f"vector({f['dim']}, {f['metric']}, {f['dtype']}){params}"
    extra = f" [{f['index']}]" if f.get("index") else ""
    if f.get("fts"):
        extra += f" [fts{', ' + f['stem'] if f.get('stem') else ''}]"
    return f["kind"] + extra


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--anchor", help="VERSION:CHAINHEX seen earlier; fail if history differs.")
def verify(file: str, anchor: str | None) -> None:
    """Re-read every frame of FILE and check every digest and the hash chain."""
    anc = None
    if anchor:
        v, _, h = anchor.partition(":")
        anc = (int(v), h)
    report = vv.verify_file(file, anchor=anc)
    if report.ok:
        click.echo(f"ok: {report.versions_checked} versions verified, chain {report.chain}")
        return
    b = report.first_break
    click.echo(f"BROKEN at version {b.version} (offset {b.offset}): {b.reason}; "
               f"{report.versions_checked} versions intact before it", err=True)
    sys.exit(1)


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--keep", default="all", show_default=True, metavar="N|DATETIME|all",
              help="Versions to keep: the newest N, those from an ISO date-time on "
                   "(with its zone), or all (compaction only).")
@click.option("--graphs", type=click.Choice(["rebuild", "repair"]), default="rebuild",
              show_default=True, help="HNSW graphs: built again from the kept rows, or "
                                      "kept with their dropped nodes' lists repaired.")
def vacuum(file: str, keep: str, graphs: str) -> None:
    """Compact FILE: drop the row versions no kept version can see."""
    try:
        with vv.connect(file) as db:
            r = db.vacuum(keep=_keep(keep), progress=True, graphs=graphs)
    except vv.VarveError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"kept versions {r.oldest}..{r.version}: {r.rows_kept} row versions kept, "
               f"{r.rows_dropped} dropped; {r.bytes_before:,} -> {r.bytes_after:,} bytes "
               f"in {r.seconds:.1f} s")


def _keep(text: str):
    import datetime
    if text == "all":
        return None
    if text.isdigit():
        return int(text)
    try:
        when = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not a count, an ISO date-time or 'all'",
                                 param_hint="--keep") from None
    if when.tzinfo is None:
        raise click.BadParameter(f"{text!r} has no zone (add +00:00 or Z)",
                                 param_hint="--keep")
    return when


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.argument("dest", type=click.Path(dir_okay=False))
def backup(file: str, dest: str) -> None:
    """Copy FILE to DEST as of its newest commit, while writers go on (verified)."""
    try:
        with vv.connect(file, readonly=True) as db:
            r = db.backup(dest, progress=True)
    except vv.VarveError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"backed up version {r.version} to {r.path} ({r.bytes:,} bytes, verified)")


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.argument("version")
def restore(file: str, version: str) -> None:
    """A new commit of FILE whose documents equal VERSION's (a number or an ISO
    date-time with its zone); history is kept."""
    when = _keep(version)
    try:
        with vv.connect(file) as db:
            new = db.restore(when)
    except vv.VarveError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"restored version {version}: now version {new}")


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--limit", default=50, show_default=True, help="Newest N versions.")
@click.option("--branch", default="main", show_default=True, help="Whose line of versions.")
def history(file: str, limit: int, branch: str) -> None:
    """The versions of FILE: number, time, rows changed, branch, chain hash."""
    try:
        with vv.connect(file, readonly=True, branch=branch) as db:
            rows = db.history()[-limit:]
    except vv.VarveError as e:
        raise click.ClickException(str(e)) from None
    for h in rows:
        click.echo(f"{h.version:>8}  {h.timestamp.isoformat(timespec='milliseconds')}  "
                   f"{h.rows_changed:>9} rows  {h.branch:<12}  {h.chain}")


# ---- branches: each verb is the Database method of the same name ------------------

def _on_branch(file: str, branch: str, readonly: bool = False):
    try:
        return vv.connect(file, readonly=readonly, branch=branch)
    except vv.VarveError as e:
        raise click.ClickException(str(e)) from None


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.argument("name")
@click.option("--from", "parent", default="main", show_default=True,
              help="The branch it forks from.")
@click.option("--at", default=None, metavar="N|DATETIME",
              help="The version of --from it sees, no later (default: its newest).")
def branch(file: str, name: str, parent: str, at: str | None) -> None:
    """Fork branch NAME from another branch of FILE."""
    with _on_branch(file, parent) as db:
        try:
            b = db.branch(name, at=None if at is None else _keep(at))
        except vv.VarveError as e:
            raise click.ClickException(str(e)) from None
    click.echo(f"branch {b.name}: forked from {b.parent} at version {b.fork}, "
               f"made at version {b.created}")


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
def branches(file: str) -> None:
    """The live branches of FILE: name, parent, fork version, newest version."""
    with _on_branch(file, "main", readonly=True) as db:
        for b in db.branches():
            click.echo(f"{b.name:<16} {b.parent or '-':<16} fork {b.fork:>8}  "
                       f"head {b.head:>8}")


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.argument("a")
@click.argument("b")
def diff(file: str, a: str, b: str) -> None:
    """Ids added, changed and deleted from A to B: each a branch name, a version
    of main, or BRANCH@VERSION."""
    def side(text: str):
        name, _, version = text.partition("@")
        if version:
            return (name, int(version)) if version.isdigit() else (name, _keep(version))
        return int(text) if text.isdigit() else text
    with _on_branch(file, "main", readonly=True) as db:
        try:
            out = db.diff(side(a), side(b))
        except vv.VarveError as e:
            raise click.ClickException(str(e)) from None
    for name, ch in out.items():
        if ch:
            click.echo(f"{name}: added {ch.added}, changed {ch.changed}, "
                       f"deleted {ch.deleted}")


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.argument("source")
@click.option("--into", default="main", show_default=True, help="The branch merged into.")
def merge(file: str, source: str, into: str) -> None:
    """Apply branch SOURCE's changes onto --into as one commit (refused, with the
    ids, when both changed an id)."""
    with _on_branch(file, into) as db:
        try:
            v = db.merge(source)
        except vv.MergeConflictError as e:
            raise click.ClickException(f"conflict: {e}") from None
        except vv.VarveError as e:
            raise click.ClickException(str(e)) from None
    click.echo(f"merged {source} into {into}: version {v}")


@main.command("drop-branch")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.argument("name")
def drop_branch(file: str, name: str) -> None:
    """Drop branch NAME of FILE (its rows go at the next vacuum)."""
    with _on_branch(file, "main") as db:
        try:
            db.drop_branch(name)
        except vv.VarveError as e:
            raise click.ClickException(str(e)) from None
    click.echo(f"dropped branch {name}")


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.argument("collection")
@click.option("--text", required=True, help='The text query: words, "a phrase", OR, -word, '
              "prefix*, parentheses.")
@click.option("--where", help="A filter (SQL boolean expression).")
@click.option("--limit", default=10, show_default=True)
@click.option("--field", "text_field", help="The full-text field (if there are several).")
@click.option("--json", "as_json", is_flag=True, help="Print the hits as JSON lines.")
def search(file: str, collection: str, text: str, where: str | None, limit: int,
           text_field: str | None, as_json: bool) -> None:
    """Full-text search of COLLECTION in FILE: the best LIMIT documents by BM25."""
    try:
        with vv.connect(file, readonly=True) as db:
            hits = db[collection].search(text=text, where=where, limit=limit,
                                         text_field=text_field)
    except vv.VarveError as e:
        raise click.ClickException(str(e)) from None
    for h in hits:
        if as_json:
            click.echo(json.dumps({"id": h.id, "score": h.score, **h.fields}, default=str))
        else:
            click.echo(f"{h.score:10.4f}  {h.id}")


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("statement", required=False)
@click.option("--json", "as_json", is_flag=True,
              help="Rows as a JSON array of objects (statements without rows print nothing).")
@click.option("--csv", "as_csv", is_flag=True, help="Rows as CSV (RFC 4180) with a header.")
@click.option("--readonly", is_flag=True, help="Open FILE read-only.")
@click.option("-n", "--no-readline", "no_readline", is_flag=True,
              help="At the prompt, read plain lines (no line editing or history), as psql -n.")
def sql(file: str, statement: str | None, as_json: bool, as_csv: bool, readonly: bool,
        no_readline: bool) -> None:
    """Run SQL on FILE (pgvector's dialect): STATEMENT (several separated by ;),
    else the script on stdin, else, on a terminal, an interactive prompt
    (\\? lists its commands). Stops at the first error: exit status 1."""
    from . import shell
    if as_json and as_csv:
        raise click.UsageError("choose one of --json and --csv")
    fmt = "json" if as_json else "csv" if as_csv else "table"
    sys.exit(shell.main(file, statement, fmt, readonly, stdin=sys.stdin,
                        out=lambda s: click.echo(s, nl=False),
                        err=lambda s: click.echo(s, nl=False, err=True),
                        line_editing=not no_readline))


@main.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; one that is not loopback needs a token.")
@click.option("--port", default=8080, show_default=True, type=click.IntRange(0, 65535))
@click.option("--token", default=None,
              help="Bearer token every route but /health needs. Given here it is on the "
                   "command line, which every user of the machine can read (ps, "
                   "/proc/PID/cmdline): prefer --token-file or VARVEDB_TOKEN.")
@click.option("--token-file", type=click.Path(exists=True, dir_okay=False), default=None,
              help="Read the token from this file (kept out of the process list).")
@click.option("--tls-cert", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--tls-key", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--max-body-mb", default=256, show_default=True, type=click.IntRange(1),
              help="Largest request body (413 above it).")
@click.option("--max-results", default=10_000, show_default=True, type=click.IntRange(1),
              help="Most rows one answer carries (422 above it).")
@click.option("--timeout", default=30.0, show_default=True, type=click.FloatRange(0.001),
              help="Seconds a read may run (504 after it).")
@click.option("--threads", default=8, show_default=True, type=click.IntRange(1, 256),
              help="Threads that run requests (reads run side by side).")
@click.option("--durability", default="commit", show_default=True,
              type=click.Choice(["commit", "batch", "off"]))
def serve(file: str, host: str, port: int, token: str | None, token_file: str | None,
          tls_cert: str | None, tls_key: str | None, max_body_mb: int, max_results: int,
          timeout: float, threads: int, durability: str) -> None:
    """Serve FILE over HTTP (see docs/server.md) until SIGTERM or Ctrl-C. The token
    comes from --token-file or --token, else the environment variable VARVEDB_TOKEN."""
    try:
        from .server import serve as run
    except ImportError as e:
        raise click.ClickException(f"the server needs the 'server' extra "
                                   f"(pip install 'varvedb[server]'): {e}") from None
    if token and token_file:
        raise click.UsageError("give --token or --token-file, not both")
    if token_file:
        with open(token_file, encoding="utf-8") as f:
            token = f.read().strip()
    elif token is None:
        # the environment, like a file, keeps the token out of the process list;
        # an option given says otherwise
        token = os.environ.get("VARVEDB_TOKEN") or None
    try:
        run(file, host=host, port=port, token=token, tls_cert=tls_cert, tls_key=tls_key,
            max_body=max_body_mb << 20, max_results=max_results, timeout=timeout,
            threads=threads, durability=durability)
    except vv.VarveError as e:
        raise click.ClickException(str(e)) from None


@main.command()
@click.option("--file", "path", default="demo.varve", show_default=True)
@click.option("--rows", default=100_000, show_default=True)
@click.option("--dim", default=128, show_default=True)
def demo(path: str, rows: int, dim: int) -> None:
    """Create a demo file, then search, update and search as of the earlier version."""
    from . import demo as demo_mod
    demo_mod.run(path, rows, dim, echo=click.echo)


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


@main.command()
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
                   "varvedb,hnswlib,faiss (varvedb:int8 = HNSW(quantize='int8')), "
                   "interleaved query by query; writes OUT/ab-<dataset>-<rows>x<dim>.*")
@click.option("--engines", default=None, metavar="ENGINES",
              help="Sweep mode: recall/QPS sweeps in fresh processes, e.g. varvedb:int8,"
                   "pgvector,faiss:ivfpq,lancedb:ivfpq (also varvedb, varvedb:ivfpq, hnswlib, "
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
def bench(ctx, rows, dim, queries, dataset, truth_file, ab, engines, memory_cap, cold, probes,
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
    from .bench import harness
    from .errors import VarveError

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
            from .bench import ab as ab_mode
            ab_mode.parse_engines(ab)     # a wrong name fails before the data is read
        if dataset is not None or ab is not None:
            from .bench import datasets
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
            from .bench import cgroup, sweep
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



@main.command("bench-layers")
@click.option("--rounds", default=9, show_default=True,
              help="Alternating rounds per figure (medians and spread over them).")
@click.option("--commits", default=200, show_default=True, help="Durable commits per round.")
@click.option("--insert-rows", default=500, show_default=True,
              help="One-row inserts per round of the sustained-insert figure.")
@click.option("--only", default="", help="Comma-separated figures: get, search, commits-1, "
                                         "commits-8, inserts, cold (default: all).")
@click.option("--out", default=None, help="Also write the figures to this JSON file.")
def bench_layers(rounds, commits, insert_rows, only, out) -> None:
    """The cost of the layers above the kernels and of the write path, each figure
    interleaved with a peer (SQLite, hnswlib) in one process. Run it on a real disk."""
    import json
    from .bench import layers
    figures = layers.run(rounds, commits, insert_rows,
                         only=[x.strip() for x in only.split(",") if x.strip()] or None,
                         echo=click.echo)
    if out:
        with open(out, "w") as f:
            json.dump(figures, f, indent=1, ensure_ascii=False)


@main.command("bench-sql")
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
def bench_sql(rows, dim, queries, rounds, m, ef_construction, ef, only, profile_queries,
              workdir, out) -> None:
    """What db.sql() costs: the time it adds over the Python API for a filtered
    top-10 query, and the same query against PostgreSQL + pgvector, interleaved
    query by query in one process. Run it on a real disk."""
    from .bench import sql
    report = sql.run(rows, dim, queries, rounds, m, ef_construction, ef, workdir,
                     only=[x.strip() for x in only.split(",") if x.strip()] or None,
                     profile_queries=profile_queries, echo=click.echo)
    if out:
        click.echo(f"bench-sql: wrote {out} and {sql.write(report, out)}")


@main.command("bench-server")
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
              type=click.Choice(["http.client", "raw", "both"]),
              help="varvedb's load generator: stdlib http.client, pre-built requests on a "
                   "raw socket (the least client-side Python), or both as separate sides.")
@click.option("--ladder-rounds", default=3, show_default=True,
              help="Rounds of the one-request ladder (each level of the server's stack, "
                   "interleaved; 0: none).")
@click.option("--quick", is_flag=True, help="Tiny sizes (a smoke test of the harness).")
@click.option("--workdir", default=None, help="Folder for the file and the PostgreSQL "
                                              "server (default: a temporary one here). "
                                              "A real disk: tmpfs is refused.")
@click.option("--out", default=None, help="Also write the figures to this JSON file, and "
                                         "as markdown next to it (.md).")
def bench_server(rows, dim, queries, rounds, seconds, threads, m, ef_construction, ef,
                 ingest_rows, batch, write_batch, ingest_rounds, write_rate, only, serve_args,
                 with_pg,
                 profile_s, client, ladder_rounds, quick, workdir, out) -> None:
    """`varvedb serve` against PostgreSQL + pgvector over TCP on 127.0.0.1: search QPS
    and p50/p99 at 1, 4 and 8 client threads, ingest rows/s (JSON, Arrow, .npy against
    binary COPY) and search under a writer, the engines alternating round by round."""
    import shlex

    from .bench import server, sql
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
            write_rate=write_rate, echo=click.echo)
    except server.BenchError as e:
        raise click.ClickException(str(e)) from None
    click.echo(server.markdown(report))
    if out:
        click.echo(f"bench-server: wrote {out} and {sql.write(report, out, server.markdown)}")


@main.command("bench-history")
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
def bench_history(rows, dim, updates, queries, rounds, docs, corpus, backup_mb,
                  writer_seconds, out) -> None:
    """Vacuum, compression and backup: sizes and times against a fresh load and SQLite."""
    from .bench import history
    from .errors import VarveError
    try:
        history.run(out, rows=rows, dim=dim, updates=updates, queries=queries, rounds=rounds,
                    docs=docs, corpus=corpus, backup_mb=backup_mb,
                    writer_seconds=writer_seconds, echo=click.echo)
    except VarveError as e:
        raise click.ClickException(str(e)) from None


@main.command("bench-branch")
@click.option("--rows", default=100_000, show_default=True, help="Rows with HNSW on main.")
@click.option("--dim", default=128, show_default=True)
@click.option("--writes", default=1000, show_default=True, help="Single-row updates on the branch.")
@click.option("--out", default="bench-results", show_default=True,
              help="A folder on a real disk (the figures are fsyncs and file bytes).")
def bench_branch(rows, dim, writes, out) -> None:
    """Fork, writes on the branch, merge: time and bytes added."""
    from .bench import branch
    branch.run(out, rows=rows, dim=dim, writes=writes, echo=click.echo)


@main.command("bench-langchain")
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
def bench_langchain(docs, dim, rounds, queries, no_peers, workdir, out) -> None:
    """The LangChain store against Chroma's (langchain-chroma): add_documents and a
    filtered similarity_search, same documents, precomputed vectors."""
    from .bench import langchain
    langchain.run(out, n=docs, dim=dim, rounds=rounds, queries=queries,
                  peers=not no_peers, workdir=workdir, echo=click.echo)


@main.command("bench-text")
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
@click.option("--varvedb/--no-varvedb", "with_varvedb", default=True, show_default=True,
              help="Measure varvedb too (--no-varvedb: FTS5 alone).")
@click.option("--workdir", default=None, help="Folder for the files (default: a temporary "
                                              "one here). Use a real disk, never tmpfs.")
@click.option("--out", default=None, help="Also write the figures to this JSON file, and "
                                         "as markdown next to it (.md).")
def bench_text(corpus, limit, queries, rounds, build_rounds, hybrid_queries, embedder,
               hybrid_docs, profile_queries, seed, with_varvedb, workdir, out) -> None:
    """Full-text search against SQLite FTS5 on the same corpus, in one process: build
    time, index bytes, latency per query class (interleaved query by query), top-10
    overlap with FTS5's ranking, and recall@10 of text, vectors and their fusion on a
    labelled set (a package's summary -> the package). Run it on a real disk."""
    from .bench import text
    from .errors import VarveError
    try:
        report = text.run(corpus, limit or None, queries, rounds, build_rounds,
                          hybrid_queries, seed, workdir, with_varvedb, embedder or None,
                          hybrid_docs, profile_queries, echo=click.echo)
    except VarveError as e:
        raise click.ClickException(str(e)) from None
    if out:
        click.echo(f"bench-text: wrote {out} and {text.write(report, out)}")


if __name__ == "__main__":
    main()
