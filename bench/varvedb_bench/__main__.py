"""`python -m varvedb_bench SUBCOMMAND …`: the commands of `varvedb bench`, run
without varvedb's command-line lookup (the bench's tests run them so)."""
from .cli import bench

bench(prog_name="varvedb bench")
