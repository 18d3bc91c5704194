"""What a trial does: the load shape and the client policy, as plain data.

A ``LoadShape`` is a frozen dataclass that round-trips through JSON; the
strategies build it, the CLI parses into it, the trial runs it, the repro file
stores it. Nothing here talks to a network or reads global settings.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from typing import Any

from faultload.model.sdk import (
    SDK_BACKOFF_CAP_S,
    SDK_KEEPALIVE_EXPIRY_S,
    SDK_POLL_TIMEOUT_S,
    SDK_SUBMIT_CONCURRENCY,
    SDK_SUBMIT_RETRY_WINDOW_S,
    sdk_version,
)
from faultload.model.timescale import trial_s
from faultload.model.training import TrainingMix

# "raw": faultload's SDK-shaped client, compiled when its binary is built (faultload/client/go), else the
# Python one; "raw-python": the Python one always (the reference the compiled one is held against); "sdk":
# the tinker SDK's own sample_async.
RAW_CLIENTS = ("raw", "raw-python")
CLIENTS = (*RAW_CLIENTS, "sdk")
ACCEPTS = ("proto", "json")
# How requests arrive over the trial; the raw client implements them (faultload.client.arrivals).
ARRIVALS = ("burst", "waves", "ramp", "poisson")

# Largest result a trial may ask for, in tokens per sample (the router's cap).
MAX_RESULT_TOKENS = 2_000_000


@dataclass(frozen=True)
class ClientPolicy:
    """The Tinker SDK's sampling-path constants, in SDK seconds (before time scale).

    Values match tinker 0.25 (a unit test reads them from the installed SDK so
    a drift is caught): 400 asample POSTs in flight per client holder, 45 s
    retrieve_future timeout, connection-error backoff ``min(2**n, 30)`` s, an
    asample retried for 300 s of elapsed time (``execute_with_retries``), idle
    connections closed after 5 s (httpx's default ``keepalive_expiry``, which
    the SDK's ``DEFAULT_CONNECTION_LIMITS`` keeps). Like the SDK's, the raw
    client's poll loop has no count limit: a trial's wall bound ends it.
    """

    submit_concurrency: int = SDK_SUBMIT_CONCURRENCY
    poll_timeout_s: float = SDK_POLL_TIMEOUT_S
    backoff_cap_s: float = SDK_BACKOFF_CAP_S
    submit_retry_window_s: float = SDK_SUBMIT_RETRY_WINDOW_S
    connect_timeout_s: float = 5.0
    keepalive_expiry_s: float = SDK_KEEPALIVE_EXPIRY_S


# Fields an older faultload wrote (the raw client's own retry limits, before it followed the SDK):
# a repro holding their old defaults loads (they meant "the SDK's rules"); any other value is refused.
LEGACY_POLICY_FIELDS = {"max_connection_retries": 16, "max_polls": 1000}


def _drop_legacy_policy(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without the retired fields; ValueError naming one that asked for something else."""
    out = dict(data)
    for name, old_default in LEGACY_POLICY_FIELDS.items():
        if name not in out:
            continue
        value = out.pop(name)
        if value != old_default:
            raise ValueError(
                f"policy.{name}={value!r} is no longer a setting: the raw client retries as the SDK does, "
                f"until the trial's wall bound (a file from an older faultload; remove the field to run it so)"
            )
    return out


@dataclass(frozen=True)
class PollBehaviour:
    """A fraction of requests whose first poll is delayed or abandoned.

    ``delay``: the first poll starts ``after_s`` SDK seconds after submit.
    ``abandon``: the first poll is dropped client-side (while the server still
    holds it) and re-polled ``after_s`` SDK seconds later, as the SDK does
    after a poll timeout followed by connection-error backoff.
    """

    fraction: float = 0.0
    after_s: float = 0.0


@dataclass(frozen=True)
class LoadShape:
    """One trial's load: how many requests, how big, how they arrive and are polled."""

    requests: int = 1024
    result_tokens: int = 64
    num_samples: int = 1
    prompt_extra_tokens: int = 0
    # Most requests outstanding (submitted, result not yet received) across
    # all workers, like the SDK's sample_max_concurrent_requests; 0 = no cap.
    max_outstanding: int = 2000
    workers: int = 1
    client: str = "raw"
    # The SDK release the sdk client runs (``tinker==X.Y.Z``, from a folder of its own); "": the one installed beside faultload.
    sdk: str = ""
    accept: str = "proto"
    # Multiplies every client and server timer (SDK seconds -> trial seconds).
    time_scale: float = 1.0
    delay_polls: PollBehaviour = field(default_factory=PollBehaviour)
    abandon_polls: PollBehaviour = field(default_factory=PollBehaviour)
    policy: ClientPolicy = field(default_factory=ClientPolicy)
    seed: int = 0
    # "burst": every request may start at t=0 (the outstanding cap still applies);
    # "waves": arrival_waves equal waves, one every arrival_span_s / arrival_waves;
    # "ramp": a rate rising linearly from 0 over arrival_span_s; "poisson": a
    # constant rate, exponential gaps (seeded), over about arrival_span_s.
    arrival: str = "burst"
    arrival_span_s: float = 0.0  # SDK seconds
    arrival_waves: int = 1
    # Trainers beside the samples (forward_backward, optim_step, heartbeats); none by default.
    training: TrainingMix = field(default_factory=TrainingMix)

    def validate(self) -> None:
        """Raise ValueError with one line naming the first bad field."""
        _check_types(self)
        policy = self.policy
        checks = [
            (self.requests >= 1, "requests must be >= 1"),
            (1 <= self.result_tokens <= MAX_RESULT_TOKENS, f"result_tokens must be in [1, {MAX_RESULT_TOKENS}]"),
            (1 <= self.num_samples <= 64, "num_samples must be in [1, 64]"),
            (0 <= self.prompt_extra_tokens <= 100_000, "prompt_extra_tokens must be in [0, 100000]"),
            (self.max_outstanding >= 0, "max_outstanding must be >= 0 (0 = no cap)"),
            (1 <= self.workers <= 64, "workers must be in [1, 64]"),
            (self.client in CLIENTS, f"client must be one of {', '.join(CLIENTS)}"),
            (not self.sdk or self.client == "sdk", "an sdk release needs client sdk"),
            (self.accept in ACCEPTS, f"accept must be one of {', '.join(ACCEPTS)}"),
            (0 < self.time_scale <= 10, "time_scale must be in (0, 10]"),
            (self.arrival in ARRIVALS, f"arrival must be one of {', '.join(ARRIVALS)}"),
            (0 <= self.arrival_span_s < math.inf, "arrival_span_s must be >= 0 and finite"),
            (1 <= self.arrival_waves <= 1_000_000, "arrival_waves must be in [1, 1000000]"),
            (
                self.arrival == "burst" or self.client in RAW_CLIENTS,
                "arrival patterns other than burst need client raw",
            ),
            # What the real SDK cannot be told to do (faultload.client.sdk).
            (
                self.accept == "proto" or self.client in RAW_CLIENTS,
                "accept json needs client raw (the SDK asks for proto)",
            ),
            (
                not (self.delay_polls.fraction or self.abandon_polls.fraction) or self.client in RAW_CLIENTS,
                "delayed or abandoned polls need client raw (the SDK polls as it decides)",
            ),
            (
                policy == ClientPolicy() or self.client in RAW_CLIENTS,
                "a client policy other than the SDK's needs client raw",
            ),
            (policy.submit_concurrency >= 1, "policy.submit_concurrency must be >= 1"),
            (0 < policy.poll_timeout_s < math.inf, "policy.poll_timeout_s must be > 0 and finite"),
            (0 <= policy.backoff_cap_s < math.inf, "policy.backoff_cap_s must be >= 0 and finite"),
            (0 <= policy.submit_retry_window_s < math.inf, "policy.submit_retry_window_s must be >= 0 and finite"),
            (0 < policy.connect_timeout_s < math.inf, "policy.connect_timeout_s must be > 0 and finite"),
            (0 < policy.keepalive_expiry_s < math.inf, "policy.keepalive_expiry_s must be > 0 and finite"),
        ]
        for name in ("delay_polls", "abandon_polls"):
            behaviour: PollBehaviour = getattr(self, name)
            checks.append((0 <= behaviour.fraction <= 1, f"{name} fraction must be in [0, 1]"))
            checks.append((0 <= behaviour.after_s < math.inf, f"{name} delay must be >= 0 seconds and finite"))
        checks += self.training.problems()
        for ok, message in checks:
            if not ok:
                raise ValueError(message)
        if self.sdk:
            sdk_version(self.sdk)

    def scaled(self, seconds: float) -> float:
        """SDK seconds -> trial seconds."""
        return trial_s(seconds, self.time_scale)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "LoadShape":
        """The inverse of :meth:`to_dict`; ValueError naming any unknown field (nested ones too)."""
        data = dict(data)
        _reject_unknown(cls, data, "load shape")
        for name, sub in (
            ("delay_polls", PollBehaviour),
            ("abandon_polls", PollBehaviour),
            ("policy", ClientPolicy),
            ("training", TrainingMix),
        ):
            if name in data and isinstance(data[name], dict):
                fields = _drop_legacy_policy(data[name]) if sub is ClientPolicy else data[name]
                _reject_unknown(sub, fields, name)
                data[name] = sub(**fields)
        return cls(**data)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "LoadShape":
        return cls.from_dict(json.loads(text))


def _reject_unknown(cls: type, data: dict[str, Any], what: str) -> None:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"unknown {what} field(s): {', '.join(unknown)}")


# Field -> the types it accepts (bool is an int to Python, but never a count here).
_NUMBER = (int, float)
_TYPES: dict[str, tuple[type, ...]] = {
    "requests": (int,),
    "result_tokens": (int,),
    "num_samples": (int,),
    "prompt_extra_tokens": (int,),
    "max_outstanding": (int,),
    "workers": (int,),
    "client": (str,),
    "sdk": (str,),
    "accept": (str,),
    "time_scale": _NUMBER,
    "seed": (int,),
    "arrival": (str,),
    "arrival_span_s": _NUMBER,
    "arrival_waves": (int,),
    "delay_polls": (PollBehaviour,),
    "abandon_polls": (PollBehaviour,),
    "policy": (ClientPolicy,),
    "policy.submit_concurrency": (int,),
    "policy.poll_timeout_s": _NUMBER,
    "policy.backoff_cap_s": _NUMBER,
    "policy.submit_retry_window_s": _NUMBER,
    "policy.connect_timeout_s": _NUMBER,
    "policy.keepalive_expiry_s": _NUMBER,
    "training": (TrainingMix,),
    "training.trainers": (int,),
    "training.steps": (int,),
    "training.datums": (int,),
    "training.datum_tokens": (int,),
    "training.spread_s": _NUMBER,
}


def _check_types(shape: "LoadShape") -> None:
    """ValueError naming the first field whose value has the wrong type (e.g. a string from a hand-edited repro)."""
    for name, types in _TYPES.items():
        obj: Any = shape
        for part in name.split("."):
            obj = getattr(obj, part)
        if isinstance(obj, bool) or not isinstance(obj, types):
            wanted = " or ".join(t.__name__ for t in types)
            raise ValueError(f"{name} must be {wanted}, got {obj!r}")
    for name in ("delay_polls", "abandon_polls"):
        behaviour = getattr(shape, name)
        for part in ("fraction", "after_s"):
            value = getattr(behaviour, part)
            if isinstance(value, bool) or not isinstance(value, _NUMBER):
                raise ValueError(f"{name} {part} must be a number, got {value!r}")


def parse_poll_behaviour(text: str, flag: str) -> PollBehaviour:
    """Parse ``P@D`` (fraction P of requests, D SDK seconds) for --delay-polls/--abandon-polls."""
    try:
        fraction_text, after_text = text.split("@", 1)
        behaviour = PollBehaviour(float(fraction_text), float(after_text))
    except ValueError:
        raise ValueError(f"{flag} expects P@D (fraction@seconds), got {text!r}") from None
    if not 0 <= behaviour.fraction <= 1 or behaviour.after_s < 0:
        raise ValueError(f"{flag} expects a fraction in [0, 1] and seconds >= 0, got {text!r}")
    return behaviour
