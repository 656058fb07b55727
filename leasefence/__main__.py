"""Run the command-line interface as ``python -m leasefence``."""

from leasefence.cli import entry

raise SystemExit(entry())
