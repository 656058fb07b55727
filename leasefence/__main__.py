"""Run the command-line interface as ``python -m leasefence``."""

from leasefence.cli import main

raise SystemExit(main())
