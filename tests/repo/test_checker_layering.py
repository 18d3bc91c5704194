"""The checker package reads plain data: importing it loads neither the trial runner nor the suite.

Nor does ``faultload check``'s side of the store (a bundle's loader, the check, the report).

Run in a fresh interpreter, so what other tests imported does not hide an import.
"""

from __future__ import annotations

import json
import subprocess
import sys

CHECKER_MODULES = (
    "budgets",
    "common",
    "compose",
    "health",
    "inputs",
    "judge",
    "resources",
    "results",
    "retries",
    "serverlog",
)


def _loaded(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport json, sys; print(json.dumps(sorted(sys.modules)))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_checker_imports_no_trial_runner_or_suite() -> None:
    loaded = _loaded("".join(f"import faultload.checker.{name}\n" for name in CHECKER_MODULES))
    heavy = {
        m
        for m in loaded
        if m == "faultload.run.trial"
        or m.startswith(("faultload.suite", "faultload.router", "faultload.run.stack", "aiohttp"))
    }
    assert not heavy


def test_budgets_import_light() -> None:
    """The CLI imports the budgets at its top, and every spawned load worker imports the CLI again."""
    loaded = _loaded("import faultload.checker\nimport faultload.checker.budgets")
    assert "numpy" not in loaded


def test_checking_a_bundle_loads_no_trial_runner_network_stack_or_toxiproxy() -> None:
    """What ``faultload check`` loads: the records, the checker and the report; nothing that runs or
    watches a trial (the run room, psutil), no HTTP stack, no Toxiproxy client."""
    loaded = _loaded("import faultload.store.check, faultload.store.bundle, faultload.store.report")
    heavy = {
        m
        for m in loaded
        if m in ("aiohttp", "toxiproxy", "requests", "httpx", "psutil", "tinker")
        or m.startswith(
            (
                "faultload.run",
                "faultload.faults",
                "faultload.suite",
                "faultload.router",
                "faultload.client",
                "faultload.targets",
            )
        )
    }
    assert not heavy
