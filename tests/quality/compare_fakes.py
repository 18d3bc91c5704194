"""Test doubles for the comparative property: an executor whose builds differ by a cost known in advance.

:class:`CostlierSwitch` is a TEST DOUBLE of :class:`faultload.suite.executor.Executor`:
it starts no server and runs no trial. It answers each config with a JSON report
holding every figure :mod:`faultload.compare.metrics` reads, the same for every
build except that a build with the ``switch`` regression costs ``factor`` times
the server CPU per request — from ``min_requests`` requests on — so a test knows
exactly which comparisons are worse and what the shrinker must come to.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from faultload.checker.inputs import Verdict
from faultload.suite.executor import TrialOutcome


def fake_report(requests: int, cpu_s: float, jitter: float = 0.0, healthz: float | None = 0.01) -> dict[str, Any]:
    """A trial report as :func:`faultload.store.report.build_report` shapes it, for the fields compared."""
    return {
        "requested": requests,
        "completed": requests,
        "wall_s": 5.0,
        "load_s": 4.0,
        "throughput_per_s": requests / 4.0 * (1 + jitter),
        "attempts": {"http_attempts": 2 * requests},
        "latency_s": {
            "submit": {"p50": 0.01 * (1 + jitter), "p99": 0.02 * (1 + jitter)},
            "e2e": {"p50": 0.1 * (1 + jitter), "p99": 0.2 * (1 + jitter)},
        },
        "server": {
            "cpu_s": cpu_s * (1 + jitter),
            "healthz_latency_s": {"p99": healthz},
            "peak_fds": 40 + requests,
            "baseline_fds": 40,
            "samples": 9,
            "healthz_probes": 9,
            "peak_rss_bytes": 100_000_000 + 1000 * requests,
            "baseline_rss_bytes": 100_000_000,
        },
        "router": {"peak_in_flight": requests},
        "invariants": [],
    }


@dataclass
class CostlierSwitch:
    """TEST DOUBLE executor: server CPU per HTTP request is 1 ms, ``factor`` times that on a build with the
    ``switch`` regression when the trial has at least ``min_requests`` requests.

    Each run's figures wobble by a tiny, fixed jitter by run number (the sides' intervals are not points).
    ``unmeasured``: the /healthz p99 is None (the prober measured nothing). ``violates``: every trial of a
    build with ``switch`` violates this invariant (its verdicts and its report say so), however cheap.
    ``costlier_trials``: only the first that many trials of the build with ``switch`` cost more (0: every one).
    ``ran`` is every config run.
    """

    switch: str = "rich-access-log"
    factor: float = 1.5
    min_requests: int = 1
    unmeasured: bool = False
    violates: str = ""
    costlier_trials: int = 0
    ran: list = field(default_factory=list)
    closed: int = 0

    def costs_more(self, config) -> bool:
        if self.switch not in config.regress or config.shape.requests < self.min_requests:
            return False
        switched = sum(1 for c in self.ran if self.switch in c.regress)  # this one's number, counting from 1
        return not self.costlier_trials or switched <= self.costlier_trials

    def run(self, config) -> TrialOutcome:
        self.ran.append(config)
        requests = config.shape.requests
        cpu_s = 2 * requests * 1e-3 * (self.factor if self.costs_more(config) else 1.0)
        jitter = ((len(self.ran) * 7) % 5 - 2) * 0.002
        report = fake_report(requests, cpu_s, jitter, None if self.unmeasured else 0.01)
        verdicts = [Verdict(name="bounded_cpu", ok=True, figure=1.0, budget=2.0, head="test double: holds")]
        if self.violates and self.switch in config.regress:
            verdicts.append(
                Verdict(
                    name=self.violates,
                    ok=False,
                    figure=128,
                    budget=0,
                    head="test double: 128 polls held past their result",
                )
            )
        report["invariants"] = [{"name": v.name, "ok": v.ok} for v in verdicts]
        return TrialOutcome(verdicts, {}, requests, 0.0, report=report)

    def close(self) -> None:
        self.closed += 1

    def describe(self) -> str:
        return f"test double: {len(self.ran)} configs run"
