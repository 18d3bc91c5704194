"""``faultload replay --repeats N``: how many runs reproduced, on values (``replay`` is a test double here:
each call answers the next scripted status, as a fresh stack's trial would)."""

from __future__ import annotations

import io

import pytest

from faultload.cli.exits import EXIT_FAILED, EXIT_HARNESS, EXIT_OK, REPLAY_EXITS
from faultload.host.workspace import Workspace
from faultload.store import repro
from faultload.store.outcomes import ReplayStatus

R, N, H = ReplayStatus.REPRODUCED, ReplayStatus.NOT_REPRODUCED, ReplayStatus.HARNESS_ERROR


@pytest.mark.parametrize(
    ("runs", "status", "code", "line"),
    [
        ([R, R, R], R, EXIT_FAILED, "reproduced 3 of 3"),
        ([N, N, N], N, EXIT_OK, "reproduced 0 of 3"),
        ([R, N, R], R, EXIT_FAILED, "reproduced 2 of 3 (flaky: it does not come back every time)"),
        ([N, H, N], H, EXIT_HARNESS, "reproduced 0 of 3; 1 not judged (harness error)"),
    ],
)
def test_repeats_say_how_many_reproduced_and_exit_by_any(runs, status, code, line, tmp_path, monkeypatch) -> None:
    file = tmp_path / "r.json"
    file.write_text("{}")
    script, seen = iter(runs), []

    def one_run(path, workspace, json_out, out, *, target, fixes, html):
        seen.append((json_out, html))
        return next(script)

    monkeypatch.setattr(repro, "replay", one_run)
    out = io.StringIO()
    got = repro.replay_repeated(
        file, Workspace(tmp_path), 3, str(tmp_path / "rep.json"), out, html=str(tmp_path / "rep.html")
    )
    assert got is status and REPLAY_EXITS[got] == code
    assert out.getvalue().splitlines()[-1] == line
    assert seen == [(str(tmp_path / f"rep-{k}.json"), str(tmp_path / f"rep-{k}.html")) for k in (1, 2, 3)]


def test_one_run_keeps_its_output_names_and_prints_no_tally(tmp_path, monkeypatch) -> None:
    file = tmp_path / "r.json"
    file.write_text("{}")
    monkeypatch.setattr(repro, "replay", lambda path, ws, json_out, out, **kw: (out.write(json_out), N)[1])
    out = io.StringIO()
    assert repro.replay_repeated(file, Workspace(tmp_path), 1, "rep.json", out) is N
    assert out.getvalue() == "rep.json"


def test_an_interrupted_run_stops_the_rest(tmp_path, monkeypatch) -> None:
    file = tmp_path / "r.json"
    file.write_text("{}")
    calls = []
    monkeypatch.setattr(repro, "replay", lambda *a, **kw: calls.append(1) or ReplayStatus.INTERRUPTED)
    assert repro.replay_repeated(file, Workspace(tmp_path), 5, None, io.StringIO()) is ReplayStatus.INTERRUPTED
    assert calls == [1]


def test_a_server_that_refuses_before_any_load_reproduces_a_refused_repro(tmp_path, monkeypatch) -> None:
    """The shipped repro of a session no SDK can read: run_trial (a test double here) raises SessionUnreadable,
    which is the server's failure come back, not a harness error; its line says what the server answered."""
    from faultload.client.session import SessionUnreadable
    from faultload.store.repro import FINDING_REPROS, load_repro

    name = "sampling_session-hatchery-0.3.0"
    data, config, _ = load_repro(FINDING_REPROS / f"{name}.json")
    assert data["refused"].startswith("the server is at fault before any load") and data["failing"] == []
    assert config.target == "hatchery==0.3.0" and config.fixes == ()

    def refusing(*args, **kwargs):
        raise SessionUnreadable("create_sampling_session answered without sampling_session_id")

    monkeypatch.setattr(repro, "run_trial", refusing)
    out = io.StringIO()
    assert repro.replay(name, Workspace(tmp_path), out=out) is R
    lines = out.getvalue().splitlines()
    assert lines[0].endswith("originally failed: refused")
    assert lines[-1] == (
        "reproduced: failing now: the server is at fault before any load: "
        "create_sampling_session answered without sampling_session_id"
    )
