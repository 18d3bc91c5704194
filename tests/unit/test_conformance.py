"""The conformance table (``faultload.conformance``): each row's trials built from every family's contract, a
cell judged from its rule's verdicts only, and the table written the same in JSON, Markdown and HTML.

Trials are not run here: ``run_trial`` is replaced by a test double returning stored results, so the cells'
logic is checked on its own; the real trials run in ``tests/integration/test_conformance_table.py``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from faultload.checker.inputs import Verdict
from faultload.conformance import run as run_mod
from faultload.conformance import table as table_mod
from faultload.conformance.rules import LIMITS, RULES, Skip
from faultload.model.family import CONTRACTS, FAMILY_NAMES
from faultload.model.trial import TrialConfig

RELEASES = {
    "skyrl": "skyrl==0.4.0",
    "tuft": "tuft==0.2.2",
    "hatchery": "hatchery==0.3.0",
    "twinkle": "twinkle==0.5.1",
}


@pytest.mark.parametrize("family", FAMILY_NAMES)
def test_every_row_builds_valid_trials_for_every_family_or_says_why_not(family: str):
    target = RELEASES[family]
    for rule in RULES:
        trials = rule.trials(target, 0.05)
        if isinstance(trials, Skip):
            assert trials.reason and trials.status in (run_mod.NOT_APPLICABLE, run_mod.NOT_JUDGED), rule.name
            continue
        assert trials and all(isinstance(config, TrialConfig) for config in trials)
        for config in trials:
            config.validate()
            assert config.target == target


def test_a_family_without_ttls_is_not_asked_about_them_and_one_with_them_is():
    ttls = next(rule for rule in RULES if rule.name == "ttls_as_promised")
    skipped = ttls.trials("tuft==0.2.2", 0.05)
    assert skipped.status == run_mod.NOT_APPLICABLE and "no TTL" in skipped.reason
    assert len(ttls.trials("skyrl==0.4.0", 0.05)) == 2  # completed and retrieved
    # hatchery-core's created-TTL edge polls 0.8 of 3,600 s late: 144 s at 0.05, past the table's 120 s wall
    late = ttls.trials("hatchery==0.3.0", 0.05)
    assert late.status == run_mod.NOT_JUDGED and "outlast the trial's wall" in late.reason
    (created,) = ttls.trials("hatchery==0.3.0", 0.04)  # 115 s: within it
    assert created.shape.delay_polls.after_s == pytest.approx(0.8 * CONTRACTS["hatchery"].created_ttl_s)


def test_a_family_that_forwards_one_at_a_time_meets_the_half_open_trial_with_one_request():
    """hatchery keeps a result past a lost delivery by its contract like any family: the suite's trial writes 8
    results at once, which one forward at a time cannot; one request under the same window asks the same."""
    from faultload.strategies.routers import router_fits

    half_open = next(rule for rule in RULES if rule.name == "retained_past_a_lost_delivery")
    (serial,) = half_open.trials("hatchery==0.3.0", 0.05)
    (concurrent,) = half_open.trials("skyrl==0.4.0", 0.05)
    assert serial.shape.requests == 1 and concurrent.shape.requests == 8
    assert serial.faults == concurrent.faults and serial.router.gen_seconds == concurrent.router.gen_seconds
    assert router_fits(serial.shape, serial.router, LIMITS, CONTRACTS["hatchery"])


def test_the_size_row_waits_the_sdks_poll_timeout_in_real_seconds():
    size = next(rule for rule in RULES if rule.name == "kept_under_size")
    (config,) = size.trials("hatchery==0.3.0", 0.05)
    assert config.shape.scaled(config.shape.policy.poll_timeout_s) == pytest.approx(45.0)
    assert config.shape.requests == config.shape.max_outstanding == 4096


def test_the_hold_row_outwaits_each_familys_own_hold():
    held = next(rule for rule in RULES if rule.name == "polls_held")
    for family, target in RELEASES.items():
        (config,) = held.trials(target, 0.05)
        hold = config.shape.scaled(CONTRACTS[family].poll_hold_s)
        assert (
            config.router.gen_seconds > hold and config.shape.policy.poll_timeout_s > config.router.gen_seconds / 0.05
        )


def _verdict(name: str, ok: bool | None, head: str = "") -> Verdict:
    return Verdict(name=name, ok=ok, figure=None, budget=None, head=head or name)


class _Result:
    """A test double of a trial's result: what ``_one`` reads before judging."""

    error = None


def _cell(monkeypatch, tmp_path: Path, rule_name: str, verdicts: list[Verdict], raises: Exception | None = None):
    rule = next(rule for rule in RULES if rule.name == rule_name)

    def fake_run(config, workspace):
        if raises is not None:
            raise raises
        return _Result()

    monkeypatch.setattr(run_mod, "run_trial", fake_run)
    monkeypatch.setattr(run_mod, "judge", lambda result, budgets: verdicts)
    config = TrialConfig(target="hatchery==0.3.0")
    return run_mod._one("hatchery==0.3.0", rule, config, None, tmp_path)


def test_a_cell_reads_its_rules_invariants_only(monkeypatch, tmp_path: Path):
    others_fail = [_verdict("no_lost_results", True), _verdict("bounded_rss", False)]
    assert _cell(monkeypatch, tmp_path, "retained_past_a_lost_delivery", others_fail).status == run_mod.KEPT
    broken = _cell(
        monkeypatch, tmp_path, "retained_past_a_lost_delivery", [_verdict("no_lost_results", False, "1 lost")]
    )
    assert broken.status == run_mod.BROKEN and "1 lost" in broken.detail
    assert broken.repro.startswith("faultload replay ") and Path(broken.repro.split()[-1]).exists()
    unknown = _cell(monkeypatch, tmp_path, "retained_past_a_lost_delivery", [_verdict("no_lost_results", None, "?")])
    assert unknown.status == run_mod.NOT_JUDGED  # unknown is never kept
    missing = _cell(monkeypatch, tmp_path, "retained_past_a_lost_delivery", [])
    assert missing.status == run_mod.NOT_JUDGED


def test_a_refused_session_breaks_the_session_row_and_leaves_the_others_not_judged(monkeypatch, tmp_path: Path):
    from faultload.client.session import SessionUnreadable

    refused = SessionUnreadable("no sampling_session_id")
    session = _cell(monkeypatch, tmp_path, "sdk_opens_a_sampling_session", [], refused)
    assert session.status == run_mod.BROKEN and "no sampling_session_id" in session.detail
    assert _cell(monkeypatch, tmp_path, "polls_held", [], refused).status == run_mod.NOT_JUDGED
    assert _cell(monkeypatch, tmp_path, "polls_held", [], OSError("port")).status == run_mod.HARNESS


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="no target's family has it"):
        run_mod.check_arguments(("skyrl==0.4.0",), ("sampling-session-answer",), ())
    with pytest.raises(ValueError, match="unknown rule 'x'"):
        run_mod.check_arguments(("skyrl==0.4.0",), (), ("x",))
    with pytest.raises(ValueError, match="a url= server is not one"):
        run_mod.check_arguments(("url=http://127.0.0.1:9",), (), ())
    assert run_mod.fixes_for("hatchery==0.3.0", ("sampling-session-answer", "plain-tracebacks")) == (
        "sampling-session-answer",
    )


def test_the_table_is_written_the_same_three_ways(tmp_path: Path):
    table = run_mod.Conformance(("skyrl==0.4.0", "hatchery==0.3.0"), ("sampling-session-answer",), 0.05, RULES[:2])
    table.cells = [
        run_mod.Cell("skyrl==0.4.0", RULES[0].name, run_mod.KEPT),
        run_mod.Cell("hatchery==0.3.0", RULES[0].name, run_mod.BROKEN, "no id <here>", "faultload run ..."),
        run_mod.Cell("skyrl==0.4.0", RULES[1].name, run_mod.KEPT),
        run_mod.Cell("hatchery==0.3.0", RULES[1].name, run_mod.NOT_APPLICABLE, "why"),
    ]
    table_mod.write(table, tmp_path / "c.json", tmp_path / "c.md", tmp_path / "c.html")
    data = json.loads((tmp_path / "c.json").read_text())
    assert data["schema"] == "faultload.conformance/1" and len(data["cells"]) == 4
    assert [c["status"] for c in data["cells"]] == ["kept", "broken", "kept", "not applicable"]
    md = (tmp_path / "c.md").read_text()
    assert f"| {RULES[0].name}: {RULES[0].asks} | kept | **broken** |" in md
    assert "Repro: `faultload run ...`" in md and "not applicable. why" in md
    page = (tmp_path / "c.html").read_text()
    assert "no id &lt;here&gt;" in page and "<here>" not in page and page.count("<tr>") == 3
