"""Bad input to ``faultload run``, end to end through a subprocess.

Each case must exit 2 with a one-line error (the first stderr line starting
with "faultload" names what is wrong) and leave nothing behind: no process
(every process the CLI starts inherits a unique tag in its environment, so
leftovers are found without mistaking other people's runs for ours), no
directory under the workdir's runs/, no router log folder in TMPDIR.

Runs use a private workdir whose ``targets`` is the real installed one.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
from conftest import assert_usage_error, run_cli

from faultload.store.repro import finding_repro_names

# --------------------------------------------------------------------------- refused while parsing


@pytest.mark.parametrize(
    "target, needle",
    [
        ("skyrl=0.4.0", "skyrl=0.4.0"),
        ("skyrl==latest", "skyrl==latest"),
        ("url=http://127.0.0.1", "url=http://127.0.0.1"),
        ("skyrl@/no/such/checkout", "not a directory"),
        ("nimbus+url=http://127.0.0.1:9", "not a server family"),
    ],
)
def test_malformed_target(cli, target, needle):
    assert_usage_error(cli("--target", target, "--quiet"), "target", needle)


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--requests", "0"], "requests"),
        (["--requests", "-5"], "--requests"),
        (["--time-scale", "0"], "time_scale"),
        (["--time-scale", "-1"], "time_scale"),
        (["--workers", "0"], "workers"),
        (["--max-wall", "0"], "max_wall"),
        (["--client", "grpc"], "--client"),
        (["--accept", "xml"], "--accept"),
        (["--delay-polls", "half@10"], "--delay-polls"),
        (["--requests", "many"], "--requests"),
        # Training options.
        (["--trainers", "lots"], "--trainers expects T"),
        (["--trainers", "0x3"], "--trainers 0x3: at least 1 trainer"),
        (["--trainers", "2x0"], "training.steps must be in [1, 100000]"),
        (["--trainers", "2x2:4@0"], "training.datum_tokens"),
        (["--trainers", "999"], "training.trainers"),
        (["--trainers", "2", "--engine", "sleeper"], "training traffic needs engine null"),
        (["--training-spread", "5"], "--training-spread needs --trainers"),
        (["--trainers", "2", "--training-spread", "-1"], "training.spread_s"),
        (["--engine", "gpu"], "--engine"),
        (["--engine-seconds-per-token", "0.01"], "engine_s_per_token needs engine null"),
        (["--trainers", "2", "--engine-seconds-per-token", "5"], "engine_s_per_token must be a number in [0, 1]"),
        (["--target", "url=http://127.0.0.1:9", "--engine", "null"], "a url= target's engine is its own"),
        # An output in a folder that does not exist is said before the trial, not after it.
        (["--json-out", "/nonexistent-faultload-dir/r.json"], "--json-out: no such directory"),
        (["--plot", "/nonexistent-faultload-dir/r.png"], "--plot: no such directory"),
        (["--history", "/nonexistent-faultload-dir/h.npz"], "--history: no such directory"),
        (["--bundle", "/nonexistent-faultload-dir/b"], "--bundle: no such directory"),
    ],
)
def test_bad_values(cli, args, needle):
    assert_usage_error(cli(*args, "--quiet"), needle)


def test_unknown_option(cli):
    assert_usage_error(cli("--requestz", "10", "--quiet"), "--requestz")


# Prints each socket connect / process start the CLI attempts (audit hooks), then runs it.
AUDITED = [
    "-c",
    textwrap.dedent(
        """
        import sys
        def hook(event, args):
            if event == "socket.connect":
                print(f"AUDIT connect {args[1]!r}", file=sys.stderr, flush=True)
            elif event in ("subprocess.Popen", "os.posix_spawn", "os.fork"):
                print(f"AUDIT spawn {event}", file=sys.stderr, flush=True)
        sys.addaudithook(hook)
        from faultload.cli.main import main
        sys.exit(main())
        """
    ),
]


def test_remote_url_refused_before_any_connection(cli):
    result = cli("--target", "url=http://10.1.2.3:8000", "--quiet", prefix=AUDITED)
    assert "AUDIT" not in result.stderr, result.stderr  # no socket connected, no process started
    assert_usage_error(result, "10.1.2.3", "--allow-remote")


def test_remote_url_refused_without_audit(cli):
    assert_usage_error(cli("--target", "url=http://10.1.2.3:8000", "--quiet"), "--allow-remote")


# --------------------------------------------------------------------------- refused while setting up
# (before anything starts; those that start real components, the router and the SkyRL server, are in
# tests/integration/test_cli_errors_integration.py)


def test_unknown_regression_is_refused_before_anything_starts(cli):
    result = cli("--target", "skyrl==0.4.0", "--regress", "nonsense", "--requests", "10", "--quiet")
    assert_usage_error(result, "unknown regression 'nonsense'", "retention")


def test_unknown_fix_is_refused_before_anything_starts(cli):
    result = cli("--target", "skyrl==0.4.0", "--fix", "nonsense", "--requests", "10", "--quiet")
    assert_usage_error(result, "unknown fix 'nonsense'", "plain-tracebacks")


def test_a_fix_needs_a_launched_target(cli):
    result = cli("--target", "url=http://127.0.0.1:9", "--fix", "plain-tracebacks", "--requests", "10", "--quiet")
    assert_usage_error(result, "--regress/--fix need a target faultload launches")


def _repro_file(tmp_path: Path) -> Path:
    import faultload.strategies as S
    from faultload.checker.budgets import Budgets
    from faultload.checker.inputs import Verdict
    from faultload.store.repro import build_repro, write_repro

    config = S.minimal_trial_config("skyrl==0.4.0", 0.05)
    repro = build_repro(
        config, [Verdict(name="no_lost_results", ok=False, figure=1, budget=0, head="1 lost")], {}, Budgets()
    )
    return write_repro(repro, tmp_path, "r")


@pytest.mark.parametrize(
    "extra, needle",
    [
        (["--fix", "nonsense"], "unknown fix 'nonsense'"),
        (
            ["--target", "url=http://127.0.0.1:9", "--fix", "plain-tracebacks"],
            "--regress/--fix need a target faultload launches",
        ),
    ],
)
def test_replay_refuses_a_fix_or_target_that_does_not_apply(tmp_path: Path, isolated_workdir: Path, extra, needle):
    path = _repro_file(tmp_path)
    result = run_cli(["replay", str(path), "--workdir", str(isolated_workdir), *extra], timeout_s=60.0)
    assert_usage_error(result, needle)
    assert not any((isolated_workdir / "runs").glob("*"))  # nothing started


def test_a_finding_repro_is_replayed_by_name_and_a_missing_file_names_them(tmp_path: Path, isolated_workdir: Path):
    """A shipped finding repro is found by its name wherever faultload is installed (here checked with a fix that
    does not apply, so nothing runs); a file that is neither says so, naming the shipped ones."""
    result = run_cli(
        ["replay", "half_open_delivery-0.4.0", "--fix", "nonsense", "--workdir", str(isolated_workdir)],
        timeout_s=60.0,
        tmpdir=tmp_path,
    )
    assert_usage_error(result, "unknown fix 'nonsense'")
    result = run_cli(["replay", "no_such_repro", "--workdir", str(isolated_workdir)], timeout_s=60.0, tmpdir=tmp_path)
    assert_usage_error(
        result,
        "no_such_repro: no such file (nor a property with a repro in the workspace, "
        f"nor a finding repro faultload ships: {', '.join(finding_repro_names())})",
    )


def test_a_property_name_replays_its_newest_repro_in_the_workspace(tmp_path: Path):
    """``faultload replay test_no_lost_results`` finds the newest repro the suite wrote for that property (its
    report beside it is not one), before any shipped finding repro of that name."""
    from faultload.store.repro import repro_path

    repros = tmp_path / "repros"
    repros.mkdir()
    older = _repro_file(repros).rename(repros / "test_no_lost_results-20261201T000000-aaaa.json")
    newer = repros / "test_no_lost_results-20261202T000000-bbbb.json"
    newer.write_text(older.read_text())
    (repros / "test_no_lost_results-20261203T000000-cccc.report.json").write_text("{}")
    os.utime(older, (1, 1))
    assert repro_path("test_no_lost_results", repros) == newer
    assert repro_path("test_polls_held", repros) == Path("test_polls_held")  # none: reading it says so
    assert repro_path(str(older), repros) == older  # a file is itself
