"""``TrialConfig`` <-> JSON: what a repro file and a trial bundle store.

``config_to_dict``/``config_from_dict`` are exact inverses for every
``TrialConfig`` (tested): nested dataclasses become objects, tuples become
lists, unknown keys are an error naming the key.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from faultload.model.faults import FaultSchedule
from faultload.model.router import RouterConfig
from faultload.model.shape import LoadShape
from faultload.model.trial import ServerKnobs, TrialConfig
from faultload.model.watchdog import WatchdogLimits


def _plain(cls: type, data: Mapping[str, Any], what: str) -> Any:
    """A flat frozen dataclass from a mapping; unknown keys are an error."""
    if not isinstance(data, Mapping):
        raise ValueError(f"{what}: expected an object, got {data!r}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{what}: unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return cls(**dict(data))


def _tuple_of_str(value: Any, what: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{what}: expected a list of strings, got {value!r}")
    return tuple(value)


# field -> (to JSON, from JSON)
_CODECS: dict[str, tuple[Any, Any]] = {
    "shape": (LoadShape.to_dict, lambda d: LoadShape.from_dict(d)),
    "router": (dataclasses.asdict, lambda d: _plain(RouterConfig, d, "router")),
    "faults": (FaultSchedule.to_dict, lambda d: FaultSchedule.from_dict(d)),
    "knobs": (dataclasses.asdict, lambda d: _plain(ServerKnobs, d, "knobs")),
    "watchdog": (dataclasses.asdict, lambda d: _plain(WatchdogLimits, d, "watchdog")),
    "regress": (list, lambda v: _tuple_of_str(v, "regress")),
    "fixes": (list, lambda v: _tuple_of_str(v, "fixes")),
    "fatal_faults": (list, lambda v: _tuple_of_str(v, "fatal_faults")),
}


def config_to_dict(config: TrialConfig) -> dict[str, Any]:
    """A ``TrialConfig`` as JSON-ready data (``config_from_dict`` is its inverse)."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        codec = _CODECS.get(f.name)
        if codec is not None:
            out[f.name] = codec[0](value)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):  # a nested value added later
            out[f.name] = dataclasses.asdict(value)
        elif isinstance(value, tuple):
            out[f.name] = list(value)
        else:
            out[f.name] = value
    return out


def config_from_dict(data: Mapping[str, Any]) -> TrialConfig:
    """The inverse of :func:`config_to_dict`; ValueError naming a bad or unknown field.

    Fields missing from ``data`` take ``TrialConfig``'s defaults, so a repro
    written before a field existed still loads.
    """
    if not isinstance(data, Mapping):
        raise ValueError("config: expected an object")
    fields = {f.name: f for f in dataclasses.fields(TrialConfig)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(f"config: unknown field(s) {', '.join(unknown)}")
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        codec = _CODECS.get(name)
        try:
            kwargs[name] = codec[1](value) if codec is not None else value
        except (TypeError, ValueError) as exc:
            raise ValueError(f"config.{name}: {exc}") from None
    if "target" not in kwargs:
        raise ValueError("config.target: missing")
    try:
        return TrialConfig(**kwargs)
    except TypeError as exc:
        raise ValueError(f"config: {exc}") from None
