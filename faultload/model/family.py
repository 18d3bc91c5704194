"""A Tinker-API server family's futures contract, as plain values: what a correct server of it may answer,
and when (SDK seconds, before a trial's time scale).

The family's code (install, launch, patch points) is ``faultload/targets/families/<family>.py`` behind
``faultload.targets.family.ServerFamily``; what the checker judges against is here, so that a stored trial is
judged without loading any of it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServerContract:
    poll_hold_s: float  # retrieve_future holds a poll for a result not ready this long...
    hold_expiry: str  # ...then answers this: "408" (SkyRL) or "try_again" (a 200 telling the client to poll again)
    retrieved_ttl_s: float | None  # a delivered result is kept this long (None: until the server stops)
    completed_ttl_s: float | None  # a completed, never-retrieved result is kept this long
    session_timeout_s: float | None  # a session not heartbeated this long is expired
    unknown_id_status: int = 404  # what a poll for an id the server never gave, or forgot, is answered


# SkyRL's skyrl.tinker.api: RETRIEVE_FUTURE_TIMEOUT_SECONDS, the in-memory store's TTLs (the retrieved one was
# 120 s before the fix `--regress retention` undoes), EngineConfig.session_timeout_sec.
SKYRL_CONTRACT = ServerContract(poll_hold_s=300.0, hold_expiry="408", retrieved_ttl_s=300.0,
                                completed_ttl_s=600.0, session_timeout_s=300.0)

# The families faultload can install and launch, by the name a target spec starts with (skyrl==X.Y.Z).
CONTRACTS = {"skyrl": SKYRL_CONTRACT}
FAMILY_NAMES = tuple(CONTRACTS)
