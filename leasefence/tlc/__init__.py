"""TLC tooling: finding the pinned ``tla2tools.jar``, running and judging configs, parsing TLA+
values, and the spec ⇄ model agreement (``leasefence tlc``)."""
