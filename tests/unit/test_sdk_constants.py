"""The raw client's policy must equal the INSTALLED tinker SDK's sampling-path constants.

Each constant is read from the installed SDK (module attributes where it has
them, its source text where the value is a literal inside a function), so an
SDK upgrade that changes one fails here, naming it, instead of silently
making the raw client unlike the SDK.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import WORKDIR, require_built

from faultload.client import raw, sdk_rules
from faultload.client.counters import LiveCounters
from faultload.client.job import COUNTER_SLOTS, WorkerJob
from faultload.model import tokens
from faultload.model.sdk import SDK_RELEASES, SDK_REQUEST_TIMEOUT_S
from faultload.model.shape import ClientPolicy, LoadShape
from faultload.record.history import Outcome
from faultload.targets.install import sdk_folder, sdk_installed

tinker = pytest.importorskip("tinker")
httpx = pytest.importorskip("httpx")
POLICY = ClientPolicy()


def _source(module_name: str) -> str:
    return inspect.getsource(importlib.import_module(module_name))


def _one(pattern: str, text: str, what: str) -> str:
    found = re.findall(pattern, text)
    assert found, f"{what}: pattern {pattern!r} not found in the installed SDK (did it change shape?)"
    assert len(set(found)) == 1, f"{what}: several different values {found}"
    return found[0]


def test_sdk_is_a_release_the_policy_describes():
    version = importlib.import_module("tinker").__version__
    assert version in SDK_RELEASES, version


@pytest.mark.parametrize("release", SDK_RELEASES[1:])
def test_every_other_sdk_release_keeps_the_same_constants(release: str):
    """This file again, in a process whose ``tinker`` is ``release`` from its own folder (as an sdk-client
    worker runs it, first on ``sys.path``): every check above must hold there too."""
    sdks = WORKDIR / "sdks"
    require_built(
        f"tinker=={release} (under {sdks})", sdk_installed(sdks, release), f"faultload setup --sdk tinker=={release}"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(sdk_folder(sdks, release)), str(WORKDIR.parent)])}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            __file__,
            "-k",
            "not every_other_sdk_release",
            "-W",
            "ignore::FutureWarning",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=WORKDIR.parent,
    )
    assert proc.returncode == 0, f"tinker=={release}:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}"
    probe = subprocess.run(
        [sys.executable, "-c", "import tinker; print(tinker.__version__)"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert probe.stdout.strip() == release  # the process above ran that release, not the one beside faultload


def _function(module_name: str, qualname: str) -> ast.FunctionDef | ast.AsyncFunctionDef:
    obj = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    node = ast.parse(textwrap.dedent(inspect.getsource(obj))).body[0]
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)), qualname
    return node


def _names(node: ast.AST) -> set[str]:
    return {
        n.attr if isinstance(n, ast.Attribute) else n.id
        for n in ast.walk(node)
        if isinstance(n, (ast.Attribute, ast.Name))
    }


def test_retrieve_loop_has_no_count_limit():
    """The SDK's poll loop is ``while True`` and never compares its connection-error count with a
    limit (the count only sizes the backoff), and the sampling path waits with no timeout: so the
    raw client has no poll or retry count either (tests/unit/test_raw_client.py checks it re-polls past 16)."""
    loop = _function("tinker.lib.api_future_impl", "_APIFuture._result_async")
    whiles = [n for n in ast.walk(loop) if isinstance(n, ast.While)]
    assert len(whiles) == 1 and isinstance(whiles[0].test, ast.Constant) and whiles[0].test.value is True
    assert not [n for n in ast.walk(whiles[0]) if isinstance(n, ast.Break)]
    for name in ("_APIFuture._result_async", "_APIFuture._handle_transport_error"):
        body = _function("tinker.lib.api_future_impl", name)
        compared = [n for n in ast.walk(body) if isinstance(n, ast.Compare) and "connection_error_retries" in _names(n)]
        assert not compared, f"{name} now compares connection_error_retries with something: a count limit?"
    sample = _function("tinker.lib.public_interfaces.sampling_client", "SamplingClient._sample_async_impl")
    waits = [
        n
        for n in ast.walk(sample)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "result_async"
    ]
    assert len(waits) == 1 and not waits[0].args and not waits[0].keywords  # no timeout
    assert not {"max_connection_retries", "max_polls"} & {f for f in ClientPolicy.__dataclass_fields__}


def test_max_connection_error_retries_is_the_bare_400_budget_not_a_poll_limit():
    """MAX_CONNECTION_ERROR_RETRIES (16) is how many bare 400s a pool turns into connection errors,
    refilled by each success; the retrieve loop does not read it."""
    holder = importlib.import_module("tinker.lib.internal_client_holder")
    assert holder.MAX_CONNECTION_ERROR_RETRIES == 16
    assert "MAX_CONNECTION_ERROR_RETRIES" in _names(
        _function("tinker.lib.internal_client_holder", "ClientConnectionPool.aclient")
    )
    assert "MAX_CONNECTION_ERROR_RETRIES" not in _source("tinker.lib.api_future_impl")


def test_submit_retry_window_is_execute_with_retries_max_wait():
    node = _function("tinker.lib.internal_client_holder", "InternalClientHolder.execute_with_retries")
    values = [
        n.value
        for n in ast.walk(node)
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "MAX_WAIT_TIME" for t in n.targets)
    ]
    assert len(values) == 1, "execute_with_retries no longer assigns MAX_WAIT_TIME once"
    window = eval(compile(ast.Expression(values[0]), "MAX_WAIT_TIME", "eval"), {})  # a literal expression: 60 * 5
    assert POLICY.submit_retry_window_s == float(window) == 300.0
    # It retries while the elapsed time is under the window, and never sleeps past its end.
    src = inspect.getsource(
        importlib.import_module("tinker.lib.internal_client_holder").InternalClientHolder.execute_with_retries
    )
    assert "elapsed_time < MAX_WAIT_TIME" in src
    assert "min(time_to_wait, start_time + MAX_WAIT_TIME - current_time)" in src


def test_asample_429_pause_is_the_sdks():
    """An asample 429 returns None to _sample_async_impl, which pauses 1 s (5 s above 128 KiB
    estimated) and calls execute_with_retries afresh; the raw client pauses the same, by the SDK's
    own estimate of our prompt's size."""
    send = inspect.getsource(
        importlib.import_module("tinker.lib.public_interfaces.sampling_client").SamplingClient._send_asample_request
    )
    assert re.search(r"e\.status_code\s*==\s*429", send) and "return None" in send
    impl = _source("tinker.lib.public_interfaces.sampling_client")
    small, limit, large = _one(
        r"backoff_duration\s*=\s*(\d+)\s+if\s+estimated_bytes_count\s*<=\s*([\d\s*]+?)\s+else\s+(\d+)",
        impl,
        "429 backoff_duration",
    )
    limit_bytes = eval(limit, {})  # "128 * 1024"
    holder = importlib.import_module("tinker.lib.internal_client_holder").InternalClientHolder
    sdk = SimpleNamespace(estimate_bytes_count_in_chunk=lambda chunk: holder.estimate_bytes_count_in_chunk(None, chunk))
    for extra in (0, 13_104, 13_105, 100_000):
        estimated = holder.estimate_bytes_count_in_model_input(
            sdk, tinker.types.ModelInput.from_ints(tokens.prompt_tokens(0, extra))
        )
        expected = float(small) if estimated <= limit_bytes else float(large)
        assert sdk_rules.rate_limit_pause_s(extra) == expected, extra
    assert sdk_rules.rate_limit_pause_s(0) != sdk_rules.rate_limit_pause_s(100_000)  # both branches were exercised


def _sdk_poll_action(status: int) -> str:
    impl = importlib.import_module("tinker.lib.api_future_impl")
    request = httpx.Request("POST", "http://sdk.invalid/api/v1/retrieve_future")
    error = tinker.APIStatusError("scripted", response=httpx.Response(status, request=request), body=None)
    kind = impl._rest_status_error_to_transport_error(error).kind.name
    return {
        "RETRY": "again",
        "RETRY_WITH_BACKOFF": "backoff",
        "RETRY_IF_BUDGET": "budget",
        "RETRYABLE_EXCEPTION": "resample",
        "FATAL": "final",
    }[kind]


def _raw_poll_action(client: raw.RawClient, status: int) -> str:
    if status == 429:  # handled in the poll loop itself, before _settle: the connection-error backoff
        return "backoff"
    outcome, bad = client._settle(0, 1, status, b"{}", 0)
    if outcome is None:
        return "budget" if bad == 1 else "again"
    return "final"


def test_poll_statuses_are_handled_as_the_sdk_does():
    """Every 4xx/5xx of retrieve_future: immediate re-poll (408, 5xx), backoff (429), the bad-request
    budget (400), final (other 4xx). 410 is the one difference: the SDK re-samples (RetryableException,
    a new asample), the raw client ends the request FAILED; SkyRL never answers 410."""
    shape = LoadShape(requests=1)
    job = WorkerJob(
        worker=0,
        base_url="http://127.0.0.1:1",
        source_ip=None,
        sampling_session_id="s",
        base_model="m",
        first=0,
        count=1,
        nonce_salt=1,
        shape=shape,
        t0=time.monotonic(),
        deadline_s=1.0,
    )
    client = raw.RawClient(job, None, LiveCounters(None, 0, len(COUNTER_SLOTS)))
    sdk = {status: _sdk_poll_action(status) for status in range(400, 600)}
    ours = {status: _raw_poll_action(client, status) for status in range(400, 600)}
    assert sdk.pop(410) == "resample" and ours.pop(410) == "final"
    assert ours == sdk
    assert client._settle(0, 1, 404, b"{}", 0)[0] == Outcome.LOST  # final, called lost (the id is gone)


def test_submit_concurrency_is_the_sample_dispatch_semaphore():
    src = _source("tinker.lib.internal_client_holder")
    value = _one(
        r"_sample_dispatch_semaphore\s*(?::\s*[\w.]+\s*)?=\s*asyncio\.Semaphore\((\d+)\)",
        src,
        "_sample_dispatch_semaphore",
    )
    assert POLICY.submit_concurrency == int(value) == 400


def test_poll_timeout_is_the_retrieve_timeout():
    src = _source("tinker.lib.api_future_impl")
    retrieve = src[src.index("futures.with_raw_response.retrieve(") :]
    retrieve = retrieve[: retrieve.index(")\n")]
    value = _one(r"timeout\s*=\s*(\d+(?:\.\d+)?)", retrieve, "retrieve_future timeout")
    assert POLICY.poll_timeout_s == float(value) == 45.0


def test_backoff_cap_is_the_connection_error_backoff():
    src = _source("tinker.lib.api_future_impl")
    cap = _one(r"asyncio\.sleep\(min\(2\s*\*\*\s*state\.connection_error_retries,\s*(\d+)\)\)", src, "poll backoff")
    assert POLICY.backoff_cap_s == float(cap) == 30.0
    # The submit path (execute_with_retries) backs off the same way.
    holder_src = _source("tinker.lib.internal_client_holder")
    submit_cap = _one(r"min\(2\s*\*\*\s*attempt_count,\s*(\d+)\)", holder_src, "submit backoff")
    assert POLICY.backoff_cap_s == float(submit_cap)


def test_bad_request_budget():
    impl = importlib.import_module("tinker.lib.api_future_impl")
    assert impl._MAX_BAD_REQUEST_RETRIES == sdk_rules.BAD_REQUEST_RETRIES == 3


def test_max_outstanding_is_sample_max_concurrent_requests():
    from tinker.types.client_config_response import ClientConfigResponse

    default = ClientConfigResponse.model_fields["sample_max_concurrent_requests"].default
    assert default == 2000
    assert LoadShape().max_outstanding == default


def test_retryable_submit_statuses_match():
    """asample: the raw client retries exactly the HTTP statuses the SDK's execute_with_retries does."""
    holder = importlib.import_module("tinker.lib.internal_client_holder").InternalClientHolder
    sdk = {status for status in range(400, 600) if holder._is_retryable_status_code(status)}
    ours = {status for status in range(400, 600) if status in sdk_rules.RETRYABLE_SUBMIT_STATUSES or status >= 500}
    assert ours == sdk


def test_proto_module_is_the_sdks():
    from faultload.client import decode

    spec = importlib.util.find_spec("tinker")
    assert Path(decode.pb.__file__).resolve() == (Path(spec.origin).parent / "proto" / "tinker_public_pb2.py").resolve()
    assert "SampleResponse" in decode.pb.DESCRIPTOR.message_types_by_name


def test_keepalive_expiry_is_the_sdk_connection_limits():
    constants = importlib.import_module("tinker._constants")
    expiry = constants.DEFAULT_CONNECTION_LIMITS.keepalive_expiry
    assert POLICY.keepalive_expiry_s == float(expiry) == 5.0


def test_request_timeout_is_the_sdk_default_timeout():
    constants = importlib.import_module("tinker._constants")
    assert SDK_REQUEST_TIMEOUT_S == float(constants.DEFAULT_TIMEOUT.read) == 60.0


def test_a_200_with_an_error_is_the_requests_failure():
    """The raw client's ``failure_reported`` rule: a 200 JSON body with an ``error`` field is the SDK's _Failed,
    read after try-again (so a try-again is never a failure), which its result loop raises."""
    from faultload.client.sdk_rules import failure_reported

    source = _source("tinker.lib.api_future_impl")
    assert source.index('if "error" in result_dict:') > source.index('result_dict.get("type") == "try_again"')
    assert "raise RequestFailedError(" in source
    assert failure_reported("application/json", b'{"type": "request_failed", "error": "boom"}') == "boom"
    assert failure_reported("application/json", b'{"type": "try_again", "error": "x"}') is None
    assert failure_reported("application/x-protobuf", b'{"error": "boom"}') is None
    assert failure_reported("application/json", b'{"sequences": []}') is None


def test_a_200_try_again_is_polled_again_at_once():
    """The raw client's ``is_try_again`` rule: a 200 JSON body of type try_again is the SDK's _TryAgain, on which
    ``_handle_outcome`` returns None (the loop polls again) without sleeping."""
    from faultload.client.sdk_rules import is_try_again

    source = _source("tinker.lib.api_future_impl")
    assert 'result_dict.get("type") == "try_again"' in source
    handle = _function("tinker.lib.api_future_impl", "_APIFuture._handle_outcome")
    branch = next(n for n in ast.walk(handle) if isinstance(n, ast.If) and "_TryAgain" in _names(n.test))
    last = branch.body[-1]
    assert isinstance(last, ast.Return) and (last.value is None or getattr(last.value, "value", 0) is None)
    assert "sleep" not in _names(ast.Module(body=branch.body, type_ignores=[]))
    assert is_try_again("application/json", b'{"type": "try_again", "request_id": "x"}')
    assert not is_try_again("application/x-protobuf", b'{"type": "try_again"}')
    assert not is_try_again("application/json", b'{"sequences": []}')
