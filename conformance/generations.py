"""The pairing of the implementation's owner tokens with the model's generations.

The implementation names a dispatch generation ``(epoch, counter)`` per rank; the model names it
by one integer (``system.next_generation``). Only equality matters to an exact-match fence, so
replay and the conformance machines learn a bijection between the two as a run goes
(``GenerationNames``): see ``conformance.refinement``'s notes. Its own module, free of the
implementation's containers, so that ``trace check`` imports no more than it runs.
"""

from __future__ import annotations

from leasefence.impl.generation import Generation

#: The first name given to a token never bound (the model issues ``epoch * GEN_BASE + counter``,
#: epochs at most a few).
FRESH = 10**15


class GenerationNames:
    """The bijection between the implementation's owner tokens ``(rank, epoch, counter)`` and the
    model's ``(rank, generation)`` (integers; ``0`` is "none"): each rank's counter restarts
    at a restart, so a model generation is unique per rank only. See the module's notes.

    A plain class with the ``__init__``, ``__repr__`` and ``__eq__`` a dataclass would have
    (``None`` for ``names`` or ``tokens``: a new empty dict): creating a dataclass costs ~2
    million instructions at import, paid by every ``trace check``."""

    def __init__(
        self,
        names: dict[tuple[int, int, int], int] | None = None,
        tokens: dict[tuple[int, int], tuple[int, int, int]] | None = None,
        fresh: int = FRESH,
    ) -> None:
        self.names: dict[tuple[int, int, int], int] = {} if names is None else names
        self.tokens: dict[tuple[int, int], tuple[int, int, int]] = {} if tokens is None else tokens
        self.fresh = fresh

    def __repr__(self) -> str:
        return (
            f"GenerationNames(names={self.names!r}, tokens={self.tokens!r}, fresh={self.fresh!r})"
        )

    def __eq__(self, other: object) -> bool:
        if isinstance(other, GenerationNames) and other.__class__ is self.__class__:
            return (self.names, self.tokens, self.fresh) == (other.names, other.tokens, other.fresh)
        return NotImplemented  # (defining __eq__ leaves the class unhashable, as a dataclass)

    def bind(self, rank: int, generation: Generation | None, model_gen: int) -> None:
        """Pair ``rank``'s implementation ``generation`` with the model's ``model_gen``; both
        must be new, or already paired with each other (a token that repeats is a bug)."""
        if generation is None and model_gen == 0:
            return
        if generation is None or model_gen == 0:
            raise AssertionError(
                f"rank {rank}: implementation generation {generation!r} against model "
                f"generation {model_gen} (one side fences by rank alone)"
            )
        token = (rank, generation[0], generation[1])
        if (
            self.names.get(token, model_gen) != model_gen
            or self.tokens.get((rank, model_gen), token) != token
        ):
            raise AssertionError(
                f"owner token {token} is model generation {self.names.get(token)}, and rank "
                f"{rank}'s model generation {model_gen} is {self.tokens.get((rank, model_gen))}: "
                "a token repeated"
            )
        self.names[token] = model_gen
        self.tokens[(rank, model_gen)] = token

    def name(self, rank: int, generation: Generation | None) -> int:
        """The model generation of ``rank``'s implementation ``generation`` (0 for None; a
        fresh name for a token never bound)."""
        if generation is None:
            return 0
        token = (rank, generation[0], generation[1])
        if token not in self.names:
            self.names[token] = self.fresh
            self.tokens[(rank, self.fresh)] = token
            self.fresh += 1
        return self.names[token]
