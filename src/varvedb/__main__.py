"""`python -m varvedb ...` is the `varvedb` command."""
from .cli import main

main(prog_name="varvedb")
