"""Budgets: the numbers the invariants compare measurements against.

A :class:`Budgets` value is plain, frozen, validated data. It is built from the
defaults below, then ``[tool.faultload.budgets]`` of a ``pyproject.toml``, then
command-line overrides (``NAME=VALUE``), each later source replacing earlier
values key by key (:func:`load_budgets`). A bad name or value raises
``ValueError`` with one line naming the key (and, for an unknown key, listing
the known ones).

Byte budgets accept an integer or a size string with a binary/decimal unit
(``"256MiB"``, ``"1GiB"``, ``"64MB"``); ``clean_log_allow`` accepts a list of
regular expressions (on the command line: one pattern, or a JSON list).

The budgets live in the ``budgets`` sub-table rather than directly in
``[tool.faultload]`` so that other faultload settings can share that table
without tripping the unknown-key check.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from faultload.checker.sizes import parse_size
from faultload.model.family import ServerContract
from faultload.model.training import DB_POOL_FDS

MIB = 1024 * 1024

PYPROJECT_TABLE = ("tool", "faultload", "budgets")


@dataclass(frozen=True)
class Budgets:
    """Limits for one trial's invariants.

    Each field's unit, the invariants it serves and the reason for its default are
    :data:`faultload.checker.budget_docs.BUDGET_DOCS` (shown in ``docs/reference/invariants.md``).
    """

    fds_per_in_flight: float = 3.0
    fds_slack: int = 64
    drain_fds_epsilon: int = 8
    drain_fds_db_pool: int = DB_POOL_FDS
    rss_bytes_per_in_flight_result_byte: float = 4.0
    rss_slack_bytes: int = 256 * MIB
    drain_rss_epsilon_bytes: int = 64 * MIB
    drain_rss_growth_fraction: float = 1.0
    # None: the target family's contract says (model.family: its retrieved and completed TTLs, or none)
    retention_window_s: float | None = None
    expiry_window_s: float | None = None
    retained_result_overhead_bytes: int = 4 * 1024
    in_flight_request_overhead_bytes: int = 64 * 1024
    healthz_p99_s: float = 2.5
    healthz_max_failures: int = 0
    healthz_failure_fraction: float = 0.0
    healthz_fault_recovery_s: float = 30.0
    server_cpu_ms_per_request: float | None = None  # None: the target family's (model.family)
    server_cpu_ms_per_result_kib: float = 0.03
    server_cpu_ms_per_training_request: float = 6.0
    cpu_min_requests: int = 2000
    attempts_per_request: float = 3.0
    attempts_per_request_max: int = 50
    unprovoked_resets_max: int = 0
    clean_log_allow: tuple[str, ...] = ()
    log_fault_grace_s: float = 5.0
    resolve_slack_s: float = 10.0
    poll_wake_slack_s: float = 1.0
    drop_notice_slack_s: float = 0.1
    forwarding_concurrency_share: float = 0.5
    forwarding_min_owed: int = 256
    forwarding_min_hold_s: float = 1.0
    heartbeat_gap_s: float = 120.0
    release_held_per_delivered: float = 0.25
    release_min_result_bytes: int = 32 * MIB
    session_rss_mib_per_k_requests: float = 4.0
    session_fds_per_k_requests: float = 2.0
    session_min_requests: int = 2000

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            object.__setattr__(self, f.name, _coerce(f.name, getattr(self, f.name)))
        checks = [
            ("fds_per_in_flight", self.fds_per_in_flight >= 0, "must be >= 0"),
            ("fds_slack", self.fds_slack >= 0, "must be >= 0"),
            ("drain_fds_epsilon", self.drain_fds_epsilon >= 0, "must be >= 0"),
            ("drain_fds_db_pool", self.drain_fds_db_pool >= 0, "must be >= 0"),
            ("rss_bytes_per_in_flight_result_byte", self.rss_bytes_per_in_flight_result_byte >= 0, "must be >= 0"),
            ("rss_slack_bytes", self.rss_slack_bytes >= 0, "must be >= 0"),
            ("drain_rss_epsilon_bytes", self.drain_rss_epsilon_bytes >= 0, "must be >= 0"),
            ("drain_rss_growth_fraction", 0 <= self.drain_rss_growth_fraction <= 1, "must be in [0, 1]"),
            ("retention_window_s", self.retention_window_s is None or self.retention_window_s >= 0, "must be >= 0"),
            (
                "expiry_window_s",
                self.retention_window_s is None
                or self.expiry_window_s is None
                or self.retention_window_s <= self.expiry_window_s,
                "must be >= retention_window_s",
            ),
            ("retained_result_overhead_bytes", self.retained_result_overhead_bytes >= 0, "must be >= 0"),
            ("in_flight_request_overhead_bytes", self.in_flight_request_overhead_bytes >= 0, "must be >= 0"),
            ("healthz_p99_s", self.healthz_p99_s > 0, "must be > 0"),
            ("forwarding_concurrency_share", 0 <= self.forwarding_concurrency_share <= 1, "must be in [0, 1]"),
            ("forwarding_min_owed", self.forwarding_min_owed >= 1, "must be >= 1"),
            ("forwarding_min_hold_s", self.forwarding_min_hold_s >= 0, "must be >= 0"),
            ("healthz_max_failures", self.healthz_max_failures >= 0, "must be >= 0"),
            ("healthz_failure_fraction", 0 <= self.healthz_failure_fraction <= 1, "must be in [0, 1]"),
            ("healthz_fault_recovery_s", self.healthz_fault_recovery_s >= 0, "must be >= 0"),
            (
                "server_cpu_ms_per_request",
                self.server_cpu_ms_per_request is None or self.server_cpu_ms_per_request > 0,
                "must be > 0",
            ),
            ("server_cpu_ms_per_result_kib", self.server_cpu_ms_per_result_kib >= 0, "must be >= 0"),
            ("server_cpu_ms_per_training_request", self.server_cpu_ms_per_training_request >= 0, "must be >= 0"),
            ("cpu_min_requests", self.cpu_min_requests >= 1, "must be >= 1"),
            ("attempts_per_request", self.attempts_per_request >= 2, "must be >= 2 (one asample + one poll)"),
            ("unprovoked_resets_max", self.unprovoked_resets_max >= 0, "must be >= 0"),
            ("attempts_per_request_max", self.attempts_per_request_max >= 2, "must be >= 2 (one asample + one poll)"),
            ("log_fault_grace_s", self.log_fault_grace_s >= 0, "must be >= 0"),
            ("resolve_slack_s", 0 <= self.resolve_slack_s < math.inf, "must be >= 0 and finite"),
            ("poll_wake_slack_s", 0 < self.poll_wake_slack_s < math.inf, "must be > 0 and finite"),
            ("drop_notice_slack_s", 0 <= self.drop_notice_slack_s < math.inf, "must be >= 0 and finite"),
            ("heartbeat_gap_s", 0 < self.heartbeat_gap_s < math.inf, "must be > 0 and finite"),
            ("release_held_per_delivered", self.release_held_per_delivered >= 0, "must be >= 0"),
            ("release_min_result_bytes", self.release_min_result_bytes > 0, "must be > 0"),
            ("session_rss_mib_per_k_requests", self.session_rss_mib_per_k_requests >= 0, "must be >= 0"),
            ("session_fds_per_k_requests", self.session_fds_per_k_requests >= 0, "must be >= 0"),
            ("session_min_requests", self.session_min_requests >= 1, "must be >= 1"),
        ]
        for name, ok, rule in checks:
            if not ok:
                raise ValueError(f"budget {name}: {getattr(self, name)!r} {rule}")
        if self.attempts_per_request_max < self.attempts_per_request:
            raise ValueError(
                f"budget attempts_per_request_max: {self.attempts_per_request_max} is below "
                f"attempts_per_request {self.attempts_per_request}"
            )

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready values (``clean_log_allow`` as a list)."""
        out = dataclasses.asdict(self)
        out["clean_log_allow"] = list(self.clean_log_allow)
        return out

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str = "budgets") -> "Budgets":
        """Defaults replaced by ``data``; unknown keys are an error naming ``source``."""
        return cls().replace(data, source)

    def replace(self, data: Mapping[str, Any], source: str = "budgets") -> "Budgets":
        """A copy with the keys of ``data`` replaced (values as TOML or CLI strings give them)."""
        known = self.names()
        for key in data:
            if key not in known:
                raise ValueError(f"{source}: unknown budget {key!r}; known: {', '.join(known)}")
        try:
            return dataclasses.replace(self, **dict(data))
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None


_BYTES_FIELDS = frozenset({"rss_slack_bytes", "drain_rss_epsilon_bytes", "release_min_result_bytes"})


def retention_s(budgets: Budgets, contract: ServerContract) -> float:
    """How long a delivered result is kept by design (SDK s): the budget, else the family's retrieved TTL, else
    for ever (a server that keeps results until it stops)."""
    return _window(budgets.retention_window_s, contract.retrieved_ttl_s)


def expiry_s(budgets: Budgets, contract: ServerContract) -> float:
    """After how long a completed result may be gone by design (SDK s): the budget, else the family's completed
    TTL, else never."""
    return _window(budgets.expiry_window_s, contract.completed_ttl_s)


def cpu_ms_per_request(budgets: Budgets, contract: ServerContract) -> float:
    """Server CPU allowed per HTTP request, before the per-KiB term: the budget, else the family's calibrated
    figure (a server family may cost more per request than another by design)."""
    if budgets.server_cpu_ms_per_request is not None:
        return budgets.server_cpu_ms_per_request
    return contract.cpu_ms_per_request


def _window(budget: float | None, contract_s: float | None) -> float:
    if budget is not None:
        return budget
    return contract_s if contract_s is not None else math.inf


def _field_types() -> dict[str, str]:
    return {f.name: str(f.type) for f in dataclasses.fields(Budgets)}


def _coerce(name: str, value: Any) -> Any:
    """Turn a default, TOML value or CLI string into the field's type, or raise one line."""
    kind = _field_types()[name]
    if value is None and kind.endswith("| None"):
        return None
    if kind.startswith("tuple"):
        if isinstance(value, str):
            text = value.strip()
            if text.startswith("["):
                try:
                    value = json.loads(text)
                except ValueError:
                    raise ValueError(f"budget {name}: {value!r} is not a JSON list of patterns") from None
            else:
                value = [value] if text else []
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"budget {name}: {value!r} is not a list of regular expressions")
        for pattern in value:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"budget {name}: {pattern!r} is not a regular expression ({exc})") from None
        return tuple(value)
    if isinstance(value, bool):
        raise ValueError(f"budget {name}: {value!r} is not a number")
    if kind == "int":
        if isinstance(value, str):
            if name in _BYTES_FIELDS:
                return parse_size(name, value)
            try:
                return int(value.strip())
            except ValueError:
                raise ValueError(f"budget {name}: {value!r} is not a whole number") from None
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if not isinstance(value, int):
            raise ValueError(f"budget {name}: {value!r} is not a whole number")
        return value
    # float
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ValueError(f"budget {name}: {value!r} is not a number") from None
    if not isinstance(value, (int, float)):
        raise ValueError(f"budget {name}: {value!r} is not a number")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"budget {name}: {value!r} is not a finite number")
    return value


def parse_override(text: str) -> tuple[str, str]:
    """``"NAME=VALUE"`` -> ``(NAME, VALUE)``; one-line ValueError otherwise."""
    name, eq, value = text.partition("=")
    if not eq or not name.strip():
        raise ValueError(f"budget override: {text!r} is not NAME=VALUE; known: {', '.join(Budgets.names())}")
    return name.strip(), value.strip()


def read_pyproject_budgets(path: Path) -> dict[str, Any]:
    """The ``[tool.faultload.budgets]`` table of ``path`` ({} when absent)."""
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except FileNotFoundError:
        raise ValueError(f"budgets: {path} not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"budgets: {path} is not valid TOML ({exc})") from None
    table: Any = data
    for key in PYPROJECT_TABLE:
        if not isinstance(table, Mapping) or key not in table:
            return {}
        table = table[key]
    if not isinstance(table, Mapping):
        raise ValueError(f"budgets: [{'.'.join(PYPROJECT_TABLE)}] in {path} is not a table")
    return dict(table)


def load_budgets(
    pyproject_path: Path | None,
    overrides: Mapping[str, str] | Iterable[str] = (),
) -> Budgets:
    """Defaults, then ``[tool.faultload.budgets]`` of ``pyproject_path`` (if given), then overrides.

    ``overrides`` is either a mapping NAME -> VALUE string or an iterable of
    ``"NAME=VALUE"`` strings (as ``--budget`` gives them).
    """
    budgets = Budgets()
    if pyproject_path is not None:
        table = read_pyproject_budgets(Path(pyproject_path))
        budgets = budgets.replace(table, f"{pyproject_path} [{'.'.join(PYPROJECT_TABLE)}]")
    return apply_overrides(budgets, overrides)


def apply_overrides(budgets: Budgets, overrides: Mapping[str, str] | Iterable[str]) -> Budgets:
    """``budgets`` with ``overrides`` (a mapping NAME -> VALUE, or ``"NAME=VALUE"`` strings) replaced.

    What ``--budget`` does on top of a pyproject's budgets (``run``) or a
    bundle's (``check``); one-line ValueError for a bad name or value.
    """
    if isinstance(overrides, Mapping):
        pairs = dict(overrides)
    else:
        pairs = {}
        for item in overrides:
            name, value = parse_override(item)
            pairs[name] = value
    return budgets.replace(pairs, "budget override") if pairs else budgets
