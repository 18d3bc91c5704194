"""SDK seconds to trial seconds: the one rule every timer follows.

A trial at time scale ``s`` multiplies every client and server timer by ``s``
(the SDK's poll timeout, backoff and retry window; the server's hold, TTLs
and sweep; the strategies' fault windows), so a 300 s TTL passes in 15 s at
0.05. The product is rounded to the microsecond so a drawn value prints, and
round-trips through a repro file, as written. Code that runs inside the
target's Python (``targets/skyrl_patches.py``) cannot import faultload and
multiplies by the same factor there.
"""

from __future__ import annotations


def trial_s(sdk_seconds: float, time_scale: float) -> float:
    """``sdk_seconds`` at ``time_scale``, in trial (real) seconds."""
    return round(sdk_seconds * time_scale, 6)
