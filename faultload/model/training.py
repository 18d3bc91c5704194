"""Training traffic beside sampling, as plain data: ``TrainingMix``.

T trainers, each its own SDK session (heartbeating on the SDK's period)
with its own LoRA model, each looping ``steps`` times: one forward_backward
of ``datums`` data of ``datum_tokens`` tokens, then one optim_step, awaiting
each future as the SDK does. ``trainers == 0`` is no training at all (the
default, and what the strategies shrink toward). The server's engine must be
able to run them (``TrialConfig.engine == "null"``: SkyRL's own engine loop
over faultload's null backend, ``targets/skyrl_engine.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAX_TRAINERS = 256
MAX_DATUM_TOKENS = 32_768
# Fds a server keeps after training calls: SQLAlchemy's pool holds its pool_size (5) SQLite connections,
# ~4 fds each. Measured on 0.4.0 after 512 samples: +1 without trainers, +6 with 4, +17 with 32, the
# same 40 s later (kept, not leaking). The drain waits for no fewer, bounded_fds allows them.
DB_POOL_FDS = 16


@dataclass(frozen=True)
class TrainingMix:
    """How much training a trial runs beside its samples (none by default)."""

    trainers: int = 0
    steps: int = 1  # forward_backward + optim_step pairs per trainer
    datums: int = 4  # data per forward_backward
    datum_tokens: int = 128  # tokens per datum (model input and target tokens alike)
    # Start of each trainer's first step, spread evenly over this many SDK seconds (0: all at t=0).
    spread_s: float = 0.0

    @property
    def enabled(self) -> bool:
        return self.trainers > 0

    @property
    def calls(self) -> int:
        """The forward_backward and optim_step calls the mix makes (0 for none)."""
        return 2 * self.trainers * self.steps

    def problems(self) -> list[tuple[bool, str]]:
        """(holds, message) for each rule, in order; the shape's validate raises on the first broken one."""
        return [
            (0 <= self.trainers <= MAX_TRAINERS, f"training.trainers must be in [0, {MAX_TRAINERS}]"),
            (1 <= self.steps <= 100_000, "training.steps must be in [1, 100000]"),
            (1 <= self.datums <= 1024, "training.datums must be in [1, 1024]"),
            (1 <= self.datum_tokens <= MAX_DATUM_TOKENS, f"training.datum_tokens must be in [1, {MAX_DATUM_TOKENS}]"),
            (0 <= self.spread_s < math.inf, "training.spread_s must be >= 0 and finite"),
        ]


def parse_training(text: str) -> TrainingMix:
    """``T`` or ``TxS`` or ``TxS:D@N`` (trainers, steps each, D datums of N tokens) for ``--trainers``."""
    try:
        head, _, body = text.partition(":")
        trainers_text, _, steps_text = head.partition("x")
        mix = TrainingMix(trainers=int(trainers_text), steps=int(steps_text) if steps_text else 1)
        if body:
            datums_text, _, tokens_text = body.partition("@")
            mix = TrainingMix(mix.trainers, mix.steps, int(datums_text), int(tokens_text or TrainingMix.datum_tokens))
    except ValueError:
        raise ValueError(
            f"--trainers expects T, TxS or TxS:D@N (trainers x steps : datums @ tokens), got {text!r}"
        ) from None
    for holds, message in [(mix.trainers >= 1, "at least 1 trainer (leave --trainers out for none)"), *mix.problems()]:
        if not holds:
            raise ValueError(f"--trainers {text}: {message}")
    return mix
