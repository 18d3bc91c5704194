"""twinkle-kit's adapter and what a server that is a Ray cluster needs of the harness: its install, what its
launch refuses, its contract, the log formats its workers write, a stop that ends processes which left the
launcher's group, and metrics summed over a process tree. The process tests run real child processes (no
doubles); nothing here starts twinkle (tests/integration/test_twinkle_integration.py does)."""

from __future__ import annotations

import importlib
import os
import sys
import textwrap
import time
import types
from pathlib import Path

import psutil
import pytest

import faultload.targets.server as server_module
from faultload.host import scratch
from faultload.model.family import CONTRACTS, TRAITS
from faultload.model.target import parse_target
from faultload.model.tokens import nonce_of, prompt_tokens
from faultload.model.trial import ServerKnobs, TrialConfig
from faultload.record.serverlog import classify_lines
from faultload.run.monitor import snapshot
from faultload.run.stack import Stack
from faultload.targets.families.twinkle import WARM_UP_NONCE, launch_twinkle
from faultload.targets.family import FAMILIES, family_of
from faultload.targets.server import ServerHandle, ServerStartError, spawn_launcher


def test_twinkles_adapter_installs_the_release_without_its_training_stacks() -> None:
    twinkle = FAMILIES["twinkle"]
    release = parse_target("twinkle==0.5.1")
    assert release.family == "twinkle" and release.venv_name == "twinkle-0.5.1" and family_of(release) is twinkle
    assert twinkle.own_install(release) == ["--no-deps", "twinkle-kit==0.5.1"]
    names = {req.split("[")[0].split(">")[0].split("=")[0].split("<")[0] for req in twinkle.requirements(release)}
    assert {"ray", "tinker", "peft"} <= names and not {"vllm", "megatron-core", "modelscope", "torch"} & names
    assert twinkle.needs_torch and twinkle.package == "twinkle-kit"
    with pytest.raises(ValueError, match="twinkle==0.5.1 has no setting forwarding_max_connections"):
        TrialConfig(target="twinkle==0.5.1", knobs=ServerKnobs(forwarding_max_connections=8)).validate()


def test_twinkles_contract_holds_30_s_keeps_results_a_day_and_runs_one_sample_at_a_time() -> None:
    contract = CONTRACTS["twinkle"]
    assert (contract.poll_hold_s, contract.hold_expiry) == (30.0, "try_again")
    assert contract.completed_ttl_s == contract.retrieved_ttl_s == contract.session_timeout_s == 86400.0
    assert (
        contract.forwards_at_once == 1
        and contract.worker_pool
        and TRAITS["twinkle"].fixes == ("prompt-logprobs-asked",)
    )


def test_the_warm_up_sample_carries_a_nonce_no_trial_draws() -> None:
    # a trial's nonces are its 16-bit salt over 24 bits of request index: the last index is 16M requests away
    assert WARM_UP_NONCE == (1 << 24) - 1 and nonce_of(prompt_tokens(WARM_UP_NONCE)) == WARM_UP_NONCE
    assert (
        WARM_UP_NONCE == (1 << 24) - 1
        and nonce_of(__import__("faultload.model.tokens").model.tokens.prompt_tokens(WARM_UP_NONCE)) == WARM_UP_NONCE
    )


def test_a_profiled_twinkle_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ServerStartError, match="twinkle's server is a Ray cluster"):
        launch_twinkle(
            parse_target("twinkle==0.5.1"), Path(sys.executable), tmp_path, 1, "http://x", profile_path=tmp_path / "p"
        )
    assert list(tmp_path.iterdir()) == []


def test_the_log_reader_places_rays_serves_and_twinkles_lines() -> None:
    lines = [
        "2026-12-06 08:43:12,167\tINFO worker.py:1691 -- Connecting to existing Ray cluster",
        'INFO 2026-12-06 08:43:14,924 serve 23741 -- Started Serve in namespace "serve".',
        "ERROR 2026-12-06 08:43:15,001 replica 23741 -- Replica failed: boom",
        "[2026-12-06 08:43:16][INFO:twinkle] Deployed server at /api/v1",
        "[2026-12-06 08:43:17][ERROR:twinkle] Traceback (most recent call last):",
        '  File "handlers.py", line 101, in _do_sample',
        "urllib.error.HTTPError: HTTP Error 503: Service Unavailable",
    ]
    summary = classify_lines(lines)
    assert summary.records == 5 and summary.errors == 2
    assert set(summary.classes) == {
        "error: replica: Replica failed: boom",
        "HTTPError: HTTP Error N: Service Unavailable",
    }
    assert summary.last_ts - summary.first_ts == pytest.approx(17.0 - 12.167, abs=1e-3)


_LAUNCHER = textwrap.dedent(
    """
    import os, subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], preexec_fn=lambda: os.setpgid(0, 0))
    print(child.pid, flush=True)
    time.sleep(60)
    """
)


def _launched(tmp_path: Path) -> tuple[ServerHandle, int]:
    """A launcher (in its own session, as every family's) whose child left its process group, as Ray's
    workers do; the child's pid, once the launcher printed it."""
    script = tmp_path / "launcher.py"
    script.write_text(_LAUNCHER)
    log = tmp_path / "server.log"
    proc = spawn_launcher([sys.executable, str(script)], tmp_path, dict(os.environ), log, append=False)
    for _ in range(200):
        if log.read_text().strip():
            break
        time.sleep(0.05)
    child = int(log.read_text().split()[0])
    handle = ServerHandle(parse_target("twinkle==0.5.1"), "http://127.0.0.1:1", proc.pid, None, log, proc, tree=True)
    return handle, child


def test_a_stop_ends_the_launchers_whole_session_and_removes_its_scratch(tmp_path: Path) -> None:
    handle, child = _launched(tmp_path)
    assert os.getpgid(child) != os.getpgid(handle.pid) and os.getsid(child) == handle.pid
    ray_temp = scratch.make("fl-tw-test-", tmp_path)
    handle.scratch.append(ray_temp)
    assert set(handle.pids()) == {handle.pid, child}
    handle.stop(grace_s=2)
    gone, _ = psutil.wait_procs([psutil.Process(child)], timeout=5) if psutil.pid_exists(child) else ([1], [])
    assert gone, f"the child {child}, in its own process group, outlived the stop"
    assert not ray_temp.exists()


def test_a_tree_snapshot_sums_the_launcher_and_its_descendants(tmp_path: Path) -> None:
    handle, child = _launched(tmp_path)
    try:
        alone, tree, kid = snapshot(handle.pid), snapshot(handle.pid, tree=True), snapshot(child)
        assert alone is not None and tree is not None and kid is not None
        assert tree.rss >= alone.rss + kid.rss * 0.9 and tree.fds >= alone.fds + kid.fds - 1
    finally:
        handle.stop(grace_s=2)


def test_twinkles_candidate_fix_asks_the_sampler_for_what_the_request_asks(monkeypatch) -> None:
    """Finding 16's fix (twinkle_fixes.py) on test doubles of twinkle's SamplingParams and tinker's SampleResponse
    (the target venv's classes, which this Python lacks; the real ones run in
    tests/integration/test_twinkle_integration.py): the params the handler builds carry the request's
    prompt-logprob ask, and the answer keeps exactly what was asked."""

    class Params:
        def __init__(self, max_tokens: int, prompt_logprobs: int | None = None) -> None:
            self.max_tokens, self.prompt_logprobs = max_tokens, prompt_logprobs

    class Response:
        def __init__(self, **fields) -> None:
            self.fields = fields

    monkeypatch.syspath_prepend(str(Path(server_module.__file__).parent))  # where the target's modules live
    monkeypatch.delitem(sys.modules, "twinkle_fixes", raising=False)
    fixes = importlib.import_module("twinkle_fixes")
    assert fixes.FIXES["prompt-logprobs-asked"]({"SamplingParams": Params, "SampleResponse": Response})

    def handler(body):  # as the route's closure: `body` is the request it builds the params and the answer for
        params = Params(max_tokens=4)
        answer = Response(sequences=[], prompt_logprobs=[None, -1.0], topk_prompt_logprobs=[None, [(7, -1.0)]])
        return params.prompt_logprobs, answer.fields

    plain = handler(types.SimpleNamespace(prompt_logprobs=None, topk_prompt_logprobs=0))
    own = handler(types.SimpleNamespace(prompt_logprobs=True, topk_prompt_logprobs=0))
    top3 = handler(types.SimpleNamespace(prompt_logprobs=True, topk_prompt_logprobs=3))
    assert [plain[0], own[0], top3[0]] == [None, 0, 3]
    assert (plain[1]["prompt_logprobs"], plain[1]["topk_prompt_logprobs"]) == (None, None)
    assert (own[1]["prompt_logprobs"], own[1]["topk_prompt_logprobs"]) == ([None, -1.0], None)
    assert top3[1]["topk_prompt_logprobs"] == [None, [(7, -1.0)]]
    assert Params(max_tokens=1).prompt_logprobs is None  # built anywhere else, a params is as it was


def test_a_shared_stack_waits_for_the_baseline_unless_the_family_has_a_worker_pool() -> None:
    """Between a session's trials the stack waits for the server's fds to come back; a worker pool's never do
    (worker_pool_drain), and waiting would restart twinkle's stack (~40 s) before every trial. Stack double:
    this process as the server, a baseline of 0 fds it is always over."""
    stack = Stack.__new__(Stack)
    stack.server = types.SimpleNamespace(pid=os.getpid(), tree=False)
    stack.baseline_fds = 0
    for target, waits in (("skyrl==0.4.0", True), ("twinkle==0.5.1", False)):
        stack.config = types.SimpleNamespace(spec=parse_target(target), engine="sleeper")
        reason = stack.wait_baseline(timeout_s=0.3, still_s=0.2)
        assert (reason is not None) is waits, (target, reason)
