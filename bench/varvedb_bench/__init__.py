"""varvedb-bench: varvedb measured against its peers on the same data (docs/bench.md).

Its own distribution beside the package: it imports varvedb, varvedb never imports
it; `varvedb bench` finds its commands (cli.py) through an entry point."""
