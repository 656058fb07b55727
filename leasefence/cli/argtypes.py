"""Argument types shared by the subcommands: each refuses bad input naming what it expected."""

from __future__ import annotations

import argparse
import math

#: ``--engine`` of ``trace check`` and ``run``: ``harness.compiled.ENGINES``, spelled out so that
#: a command's ``--help`` imports no harness (tests/unit/test_compiled.py holds the two equal).
ENGINES = ("auto", "compiled", "interpreted")


def _whole(text: str, minimum: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(f"expected a number >= {minimum}, got {value}")
    return value


def nonneg(text: str) -> int:
    """A whole number >= 0."""
    return _whole(text, 0)


def count(text: str) -> int:
    """A whole number >= 1."""
    return _whole(text, 1)


def seconds(text: str) -> float:
    """A finite number of seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"expected a finite number of seconds >= 0, got {text}")
    return value


def rate(text: str) -> float:
    """A probability in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a probability, got {text!r}") from None
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"expected a probability in [0, 1], got {text}")
    return value
