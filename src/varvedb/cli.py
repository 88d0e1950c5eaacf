"""The `varvedb` command: the API's verbs for the shell."""
from __future__ import annotations

import json
import os
import sys

import click

import varvedb as vv


class _Verbs(click.Group):
    """The verbs, and `bench`: the varvedb-bench distribution's command group, found
    through the entry point it declares and imported only when `varvedb bench` runs
    (the package never imports its bench). Without it, the placeholder below runs."""

    def resolve_command(self, ctx, args):
        name, cmd, rest = super().resolve_command(ctx, args)
        if name == "bench":
            from importlib.metadata import entry_points
            for ep in entry_points(group="varvedb.commands", name="bench"):
                return name, ep.load(), rest
        return name, cmd, rest

    def invoke(self, ctx):
        """Every verb: a VarveError is one line, `Error: ...`, and exit status 1."""
        try:
            return super().invoke(ctx)
        except vv.VarveError as e:
            raise click.ClickException(str(e)) from None


@click.group(cls=_Verbs)
@click.version_option(vv.__version__, prog_name="varvedb")
def main() -> None:
    """varvedb: an embedded, single-file, versioned document + vector database."""


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def info(file: str, as_json: bool) -> None:
    """Collections, rows, version and size of FILE."""
    with vv.connect(file, readonly=True) as db:
        eng = db.engine
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
            t = coll.table
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
        if not (v.isascii() and v.isdigit()):
            raise click.BadParameter(f"VERSION:CHAINHEX, a version number first; got "
                                     f"{anchor!r}", param_hint="'--anchor'")
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
@click.option("--create", is_flag=True, help="Make FILE if it does not exist (else refused).")
def sql(file: str, statement: str | None, as_json: bool, as_csv: bool, readonly: bool,
        no_readline: bool, create: bool) -> None:
    """Run SQL on FILE (pgvector's dialect): STATEMENT (several separated by ;),
    else the script on stdin, else, on a terminal, an interactive prompt
    (\\? lists its commands). Stops at the first error: exit status 1. A FILE
    that does not exist is refused (a typo makes no new file) unless --create."""
    from . import shell
    if as_json and as_csv:
        raise click.UsageError("choose one of --json and --csv")
    if not create and not os.path.exists(file):
        raise click.ClickException(f"{file} does not exist (--create makes a new file)")
    fmt = "json" if as_json else "csv" if as_csv else "table"
    sys.exit(shell.main(file, statement, fmt, readonly, stdin=sys.stdin,
                        out=lambda s: click.echo(s, nl=False),
                        err=lambda s: click.echo(s, nl=False, err=True),
                        line_editing=not no_readline))


@main.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.argument("collection")
@click.argument("data", type=click.Path(exists=True, dir_okay=False))
@click.option("--vector", "vector", default=None, metavar="COL",
              help="The vector column (a csv's in [1,2,3] form; a .npy's field name, "
                   "default 'embedding').")
@click.option("--dim", default=None, type=click.IntRange(1), help="The vector column's size.")
@click.option("--progress/--no-progress", default=None,
              help="A progress bar (default: when stderr is a terminal).")
def import_(file: str, collection: str, data: str, vector: str | None, dim: int | None,
            progress: bool | None) -> None:
    """Insert the rows of DATA (.jsonl, .csv, .parquet or .npy) into COLLECTION of
    FILE (both made when missing: the collection from the data's types)."""
    from .transfer import import_file
    made, empty = not os.path.exists(file), False
    try:
        with vv.connect(file) as db:
            try:
                n = import_file(db, collection, data, vector=vector, dim=dim,
                                progress=progress)
            except vv.VarveError:
                empty = made and db.version == 0
                raise
    finally:
        if empty:          # a file made for an import that committed nothing
            os.remove(file)
    click.echo(f"imported {n:,} rows into {collection}")


@main.command("export")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.argument("collection")
@click.argument("out", type=click.Path(dir_okay=False))
@click.option("--as-of", "as_of", default=None, metavar="N|DATETIME",
              help="The version to export (a number or an ISO date-time with its zone).")
@click.option("--where", default=None, help="A filter (SQL boolean expression).")
def export(file: str, collection: str, out: str, as_of: str | None,
           where: str | None) -> None:
    """Write COLLECTION of FILE to OUT (.jsonl, .csv or .parquet): id and every field."""
    from .transfer import export_file
    with vv.connect(file, readonly=True) as db:
        n = export_file(db, collection, out, as_of=None if as_of is None else _keep(as_of),
                        where=where)
    click.echo(f"exported {n:,} rows to {out}", err=True)


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
@click.option("--transaction-idle-timeout", default=60.0, show_default=True,
              type=click.FloatRange(0.001),
              help="Seconds a transaction opened over HTTP (POST /transactions), or a "
                   "--pg session inside one, may sit idle before it is rolled back "
                   "(the session ended, 25P03), freeing the writer.")
@click.option("--warm/--no-warm", "warm_first", default=True, show_default=True,
              help="Compile every kernel before listening (`varvedb warm`).")
@click.option("--pg", "pg_port", default=None, type=click.IntRange(0, 65535),
              help="Also speak the PostgreSQL protocol on this port (docs/pgwire.md): "
                   "psql, psycopg and other PostgreSQL clients connect; the token is "
                   "their password (SCRAM-SHA-256).")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1, 256),
              help="Read-worker processes (one per core: reads run on every core). Over "
                   "1, each follows the file read-only and forwards writes to one writer "
                   "process (docs/server.md, 'Read workers').")
@click.option("--replica-of", "replica_of", default=None, metavar="URL",
              help="Serve FILE as a read replica of the varvedb server at URL: seeded from "
                   "its backup when FILE does not exist, then following its commits; "
                   "writes are refused (docs/server.md, 'Read replicas'). The leader's "
                   "token comes from VARVEDB_LEADER_TOKEN.")
def serve(file: str, host: str, port: int, token: str | None, token_file: str | None,
          tls_cert: str | None, tls_key: str | None, max_body_mb: int, max_results: int,
          timeout: float, threads: int, durability: str, transaction_idle_timeout: float,
          warm_first: bool, pg_port: int | None, workers: int,
          replica_of: str | None) -> None:
    """Serve FILE over HTTP (see docs/server.md), and with --pg over PostgreSQL's
    protocol too, until SIGTERM or Ctrl-C. The token comes from --token-file or
    --token, else the environment variable VARVEDB_TOKEN."""
    try:
        from .server import serve, serve_workers
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
    options = dict(host=host, port=port, token=token, tls_cert=tls_cert, tls_key=tls_key,
                   max_body=max_body_mb << 20, max_results=max_results, timeout=timeout,
                   threads=threads, durability=durability, warm=warm_first,
                   transaction_idle_timeout=transaction_idle_timeout, pg_port=pg_port)
    if replica_of is not None:
        if workers > 1:
            raise click.UsageError("a read replica (--replica-of) serves with one process")
        options.update(replica_of=replica_of,
                       leader_token=os.environ.get("VARVEDB_LEADER_TOKEN") or None)
    try:
        if workers > 1:
            serve_workers(file, workers, **options)
        else:
            serve(file, **options)
    except vv.VarveError as e:
        raise click.ClickException(str(e)) from None


@main.command()
@click.argument("url")
@click.argument("dest", type=click.Path(dir_okay=False))
@click.option("--once", is_flag=True,
              help="Catch up with the leader, then exit (default: follow until Ctrl-C).")
def replicate(url: str, dest: str, once: bool) -> None:
    """Keep DEST a read replica of the varvedb server at URL: seed it from the
    server's backup when DEST does not exist, then append the server's commits
    as they come (docs/server.md, 'Read replicas'). The server's token comes
    from VARVEDB_LEADER_TOKEN."""
    import logging
    from .replica import LONG_POLL, Replica
    logging.basicConfig(format="%(message)s")
    rep = Replica(url, dest, token=os.environ.get("VARVEDB_LEADER_TOKEN") or None)
    try:
        db = rep.open()
        try:
            if once:
                while rep.pull() or db.engine.visible < rep.leader_version:
                    pass
            else:
                click.echo(f"replicating {url} into {dest}; Ctrl-C stops", err=True)
                try:
                    while True:
                        rep.run_once(LONG_POLL)
                except KeyboardInterrupt:
                    pass
        finally:
            db.close()
    except vv.VarveError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"{dest} is at version {db.engine.written} "
               f"(the leader's: {rep.leader_version})", err=True)


@main.command()
@click.option("--processes", type=click.IntRange(1), default=None,
              help="Worker processes (default: one per core).")
@click.option("--report", is_flag=True,
              help="List the kernels compiled: CPU and wall seconds (their own), count; "
                   "costliest first.")
@click.option("--again", is_flag=True,
              help="Run every feature set even when an earlier warm completed.")
@click.option("--ahead", "shares", multiple=True, hidden=True,
              help="Compile ahead only these first-use shares, in this process "
                   "(what kernels/ahead.py starts).")
def warm(processes: int | None, report: bool, again: bool, shares: tuple[str, ...]) -> None:
    """Compile every kernel the installed features use, on every core, into numba's
    disk cache, so that no first search waits on compilation (once per machine)."""
    if shares:
        from .warm import compile_ahead
        compile_ahead(list(shares))
        return
    from .warm import warm as warm_kernels
    done = warm_kernels(processes=processes, progress=True, again=again)
    click.echo(f"varvedb warm: {done.summary()}")
    if report:
        cpu = done.compile_cpu_seconds
        for kernel in sorted(cpu, key=lambda k: (-cpu[k], k)):
            click.echo(f"  {cpu[kernel]:7.2f} s CPU  {done.compile_seconds[kernel]:7.2f} s wall"
                       f"  {done.compiled[kernel]:3d}x  {kernel}")
        for kernel in done.here:
            click.echo(f"  compiled in this process too: {kernel}")


@main.command()
@click.option("--file", "path", default="demo.varve", show_default=True)
@click.option("--rows", default=100_000, show_default=True)
@click.option("--dim", default=128, show_default=True)
def demo(path: str, rows: int, dim: int) -> None:
    """Create a demo file, then search, update and search as of the earlier version."""
    from . import demo as demo_mod
    demo_mod.run(path, rows, dim, echo=click.echo)


@main.command(add_help_option=False,
              context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.pass_context
def bench(ctx) -> None:
    """Measure varvedb against its peers: ann, sql, text, server, history, branch,
    langchain, layers (docs/bench.md)."""
    click.echo("varvedb bench: the comparison harness is its own distribution, "
               "varvedb-bench, in the repository's bench/ folder; install it with "
               "`pip install -e ./bench` (or run `make bench`)", err=True)
    ctx.exit(1)


if __name__ == "__main__":
    main()
