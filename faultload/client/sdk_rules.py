"""The tinker SDK's (0.25) sampling retry rules, which the raw client follows; plain functions of plain values.

Read from the installed SDK (``tests/unit/test_sdk_constants.py`` checks each):

- asample (``InternalClientHolder.execute_with_retries``): retried on
  ``APIConnectionError`` (timeouts included), ``httpx.TimeoutException``,
  ``asyncio.TimeoutError`` and HTTP 408, 409, 5xx, with backoff
  ``min(2**n, 30)`` s, as long as the elapsed time is under 300 s (a sleep
  never runs past it); then it raises what it last met. Other statuses raise
  at once. A 429 never reaches that loop: ``_send_asample_request`` returns
  None, and ``_sample_async_impl`` pauses 1 s (5 s for a prompt estimated
  above 128 KiB, 10 bytes per token) and calls ``execute_with_retries``
  afresh, its window and exponent begun again, with no count limit.
- retrieve_future (``_APIFuture._result_async``): ``while True`` with no
  count or time limit (the sampling path waits with no timeout). A
  connection error (a 45 s client timeout included) or 429 re-polls after
  ``min(2**n, 30)`` s, n counting them and reset by any other HTTP answer;
  408 and 5xx re-poll at once, as does a 200 whose JSON body is the SDK's
  ``TryAgainResponse`` (``{"type": "try_again"}``: how a server whose hold
  ends without a 408, such as TuFT, says "not yet"); a bare 400 re-polls up to 3 times (a 408
  re-opens that budget); 410 raises ``RetryableException`` (the SDK's
  ``RetryHandler`` then samples anew; SkyRL never answers 410, and the raw
  client ends that request failed); other 4xx (404 included) raise.
- ``MAX_CONNECTION_ERROR_RETRIES`` (16) is not a poll limit: it is how many
  bare 400s a connection pool turns into connection errors.

Above all of that, the SDK's ``RetryHandler`` retries a whole sample that raised
a retryable error (a new asample) until its stuck detection (no progress for
7,200 s); the raw client does not: a trial's wall bound is far shorter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from faultload.model import tokens
from faultload.model.sdk import (
    SDK_BYTES_PER_TOKEN,
    SDK_LARGE_PROMPT_BYTES,
    SDK_LARGE_RATE_LIMIT_PAUSE_S,
    SDK_RATE_LIMIT_PAUSE_S,
)


@dataclass(frozen=True)
class SamplingRules:
    """Which answers the SDK retries and how, as data: the raw client reads it, and the compiled client
    (faultload/client/go) receives it in its spec, so the rules are stated once for both."""

    # asample statuses retried with backoff inside the retry window besides 5xx (_is_retryable_status_code)
    submit_retry_statuses: tuple[int, ...] = (408, 409)
    rate_limited: int = 429  # an asample 429: a pause that starts the window afresh
    poll_backoff_statuses: tuple[int, ...] = (429,)  # re-polled after the connection-error backoff
    poll_at_once_statuses: tuple[int, ...] = (408,)  # re-polled at once, as every 5xx
    lost_statuses: tuple[int, ...] = (404,)  # the server no longer knows the request: raised
    bad_request: int = 400  # a bare 400 re-polled up to bad_request_retries times (_MAX_BAD_REQUEST_RETRIES)
    bad_request_retries: int = 3
    bad_request_reset_by: tuple[int, ...] = (408,)  # a round trip that re-opens the bare-400 budget
    retry_server_errors: bool = True  # every 5xx: an asample retried in the window, a poll repeated at once


SDK_SAMPLING_RULES = SamplingRules()
# The same, as the raw client's hot paths test them.
RETRYABLE_SUBMIT_STATUSES = (*SDK_SAMPLING_RULES.submit_retry_statuses, SDK_SAMPLING_RULES.rate_limited)
RATE_LIMITED = SDK_SAMPLING_RULES.rate_limited
BAD_REQUEST_RETRIES = SDK_SAMPLING_RULES.bad_request_retries


def backoff_s(failures: int, cap_s: float) -> float:
    """The SDK's connection-error backoff after ``failures`` earlier ones (SDK seconds)."""
    return min(2.0**failures, cap_s)


def rate_limit_pause_s(prompt_extra_tokens: int) -> float:
    """The SDK's pause after an asample 429 (SDK seconds), by its estimate of the prompt's size."""
    prompt_bytes = len(tokens.prompt_tokens(0, prompt_extra_tokens)) * SDK_BYTES_PER_TOKEN
    return SDK_RATE_LIMIT_PAUSE_S if prompt_bytes <= SDK_LARGE_PROMPT_BYTES else SDK_LARGE_RATE_LIMIT_PAUSE_S


# A try-again answer is a few fields; a body larger than this is a result, never parsed as one.
_TRY_AGAIN_MAX_BYTES = 4096


def failure_reported(content_type: str, payload: bytes) -> str | None:
    """The error of a 200 poll answer that is the server's failure report (JSON with an ``error`` field, as
    ``RequestFailedResponse``: the SDK raises ``RequestFailedError`` on it, ``_APIFuture._result_async``), else
    None. A result (proto, large, or without the word) is not parsed twice."""
    if "json" not in content_type or len(payload) > _TRY_AGAIN_MAX_BYTES or b'"error"' not in payload:
        return None
    try:
        body = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(body, dict) or "error" not in body or body.get("type") == "try_again":
        return None
    return str(body["error"])


def is_try_again(content_type: str, payload: bytes) -> bool:
    """A 200 poll answer that is the SDK's ``TryAgainResponse`` (JSON ``{"type": "try_again", ...}``), which
    the SDK polls again at once (``_APIFuture._handle_outcome``)."""
    if "json" not in content_type or len(payload) > _TRY_AGAIN_MAX_BYTES or b"try_again" not in payload:
        return False  # a result (proto, large, or without the word) is not parsed twice
    try:
        body = json.loads(payload)
    except ValueError:
        return False
    return isinstance(body, dict) and body.get("type") == "try_again"
