"""The row type of ``leasefence verify`` and the registry of its layers (a leaf: imports nothing).

Every layer lives beside what it checks and returns ``list[Row]``; ``LAYERS`` names each one as
``"module:function"`` so that ``leasefence.verify`` imports a layer only when it runs and no layer
ever imports ``verify`` back.
"""

from __future__ import annotations

from dataclasses import dataclass

PASS, FAIL, SKIP = "pass", "FAIL", "skip"


@dataclass
class Row:
    """One layer's line in the summary: what ran, its figures, the result and the time taken."""

    layer: str
    ran: str
    figures: str
    result: str
    seconds: float = 0.0
    detail: str = ""


#: Every layer of ``leasefence verify``, in the order it runs: (name, "module:function"), each
#: function taking ``deep: bool`` and returning ``list[Row]``.
LAYERS: tuple[tuple[str, str], ...] = (
    ("lint/types", "leasefence.verify:layer_lint"),
    ("model check", "leasefence.modelcheck:layer_model"),
    ("live check", "leasefence.modelcheck:layer_live"),
    ("tlc", "leasefence.tlc.layer:verify_rows"),
    ("crashcheck", "leasefence.harness.crash.layer:layer_crashcheck"),
    ("campaign", "leasefence.harness.campaign.layer:layer_campaign"),
    ("conformance", "leasefence.conformance.layer:layer_conformance"),
    ("transitions", "leasefence.conformance.transition_layer:layer_transitions"),
    ("crosshair", "leasefence.conformance.contracts:verify_rows"),
    ("planted bugs", "leasefence.harness.mutants.layer:verify_rows"),
)


def format_table(rows: list[Row], total: float) -> str:
    """The summary table ``verify`` prints and writes to ``reports/verify.md``."""
    head = ["layer", "what ran", "figures", "result", "time"]
    body = [[r.layer, r.ran, r.figures, r.result, f"{r.seconds:.1f} s"] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(head, *body, strict=False)]
    fmt = "| " + " | ".join(f"{{:<{w}}}" for w in widths) + " |"
    lines = [fmt.format(*head), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    lines += [fmt.format(*b) for b in body]
    lines.append(
        f"\ntotal {total:.1f} s; {sum(r.result == FAIL for r in rows)} failed, "
        f"{sum(r.result == SKIP for r in rows)} skipped"
    )
    return "\n".join(lines)
