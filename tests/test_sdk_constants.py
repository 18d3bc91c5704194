"""The raw client's policy must equal the INSTALLED tinker SDK's sampling-path constants.

Each constant is read from the installed SDK (module attributes where it has
them, its source text where the value is a literal inside a function), so an
SDK upgrade that changes one fails here, naming it, instead of silently
making the raw client unlike the SDK.
"""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

from faultload.client import raw
from faultload.model.sdk import SDK_REQUEST_TIMEOUT_S
from faultload.model.shape import ClientPolicy, LoadShape

tinker = pytest.importorskip("tinker")
POLICY = ClientPolicy()


def _source(module_name: str) -> str:
    return inspect.getsource(importlib.import_module(module_name))


def _one(pattern: str, text: str, what: str) -> str:
    found = re.findall(pattern, text)
    assert found, f"{what}: pattern {pattern!r} not found in the installed SDK (did it change shape?)"
    assert len(set(found)) == 1, f"{what}: several different values {found}"
    return found[0]


def test_sdk_is_the_version_the_policy_describes():
    version = importlib.import_module("tinker").__version__
    assert version.startswith("0.25."), version


def test_max_connection_retries():
    holder = importlib.import_module("tinker.lib.internal_client_holder")
    assert holder.MAX_CONNECTION_ERROR_RETRIES == 16
    assert POLICY.max_connection_retries == holder.MAX_CONNECTION_ERROR_RETRIES


def test_submit_concurrency_is_the_sample_dispatch_semaphore():
    src = _source("tinker.lib.internal_client_holder")
    value = _one(r"_sample_dispatch_semaphore\s*(?::\s*[\w.]+\s*)?=\s*asyncio\.Semaphore\((\d+)\)", src, "_sample_dispatch_semaphore")
    assert POLICY.submit_concurrency == int(value) == 400


def test_poll_timeout_is_the_retrieve_timeout():
    src = _source("tinker.lib.api_future_impl")
    retrieve = src[src.index("futures.with_raw_response.retrieve("):]
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
    assert impl._MAX_BAD_REQUEST_RETRIES == raw._BAD_REQUEST_RETRIES == 3


def test_max_outstanding_is_sample_max_concurrent_requests():
    from tinker.types.client_config_response import ClientConfigResponse

    default = ClientConfigResponse.model_fields["sample_max_concurrent_requests"].default
    assert default == 2000
    assert LoadShape().max_outstanding == default


def test_retryable_submit_statuses_match():
    """asample: the raw client retries exactly the HTTP statuses the SDK's execute_with_retries does."""
    holder = importlib.import_module("tinker.lib.internal_client_holder").InternalClientHolder
    sdk = {status for status in range(400, 600) if holder._is_retryable_status_code(status)}
    ours = {status for status in range(400, 600) if status in raw.RETRYABLE_SUBMIT_STATUSES or status >= 500}
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
