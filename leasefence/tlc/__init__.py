"""TLC tooling (``leasefence tlc``): ``jar`` finds java and the pinned ``tla2tools.jar``,
``values`` parses TLA+ values as TLC prints them, ``configs`` reads the configs and what each must
do, ``runner`` runs TLC and reads its output, ``agree`` compares the spec's state graph with the
model's, ``commands`` is what the command prints, and ``layer`` is its row of ``leasefence verify``.

The names below are the package's short public face for callers outside it (the benchmarks).
"""

from leasefence.tlc.configs import TLA_DIR, all_configs
from leasefence.tlc.jar import TlcUnavailable, Tools, find_tools
from leasefence.tlc.runner import TlcResult, Verdict, check_config, run_tlc

__all__ = [
    "TLA_DIR",
    "TlcResult",
    "TlcUnavailable",
    "Tools",
    "Verdict",
    "all_configs",
    "check_config",
    "find_tools",
    "run_tlc",
]
