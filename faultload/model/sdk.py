"""The tinker SDK's own timers (SDK seconds, before a trial's time scale), stated once, and how an SDK release
is named. A server's timers are its family's contract (``faultload.model.family``), never here.

Retention and keep-alive bugs live on these landmarks; ``ClientPolicy``'s
defaults, the strategies' limits and the suite's trial labels all read them
from here. ``tests/unit/test_sdk_constants.py`` reads the installed SDK so a drift is caught.
"""

from faultload.model.target import RELEASE_VERSION

SDK_PACKAGE = "tinker"
# The SDK releases whose sampling path these constants describe, each checked against them by
# tests/unit/test_sdk_constants.py: the first is the one installed beside faultload (the release SkyRL 0.3.0 and
# 0.4.0 pin), the others run from folders of their own (--sdk, --faultload-sdk).
SDK_RELEASES = ("0.25.0", "0.38.0")

# The API key every faultload client sends (X-API-Key, as the SDK does), and a launched server that checks keys
# authorizes; never a real TINKER_API_KEY from the environment.
SDK_API_KEY = "tml-faultload"
SDK_SUBMIT_CONCURRENCY = 400  # asample POSTs in flight per client holder
SDK_POLL_TIMEOUT_S = 45.0  # retrieve_future client timeout
SDK_REQUEST_TIMEOUT_S = 60.0  # the SDK's default HTTP timeout (asample and every call without its own)
SDK_BACKOFF_CAP_S = 30.0  # connection-error backoff cap
# execute_with_retries retries an asample for this long (elapsed), then raises what it last met.
SDK_SUBMIT_RETRY_WINDOW_S = 300.0
# An asample answered 429 pauses the holder this long, then starts a fresh execute_with_retries
# (its window and backoff exponent begin again): 1 s, or 5 s for a prompt the SDK estimates above
# SDK_LARGE_PROMPT_BYTES (10 bytes per token).
SDK_RATE_LIMIT_PAUSE_S = 1.0
SDK_LARGE_RATE_LIMIT_PAUSE_S = 5.0
SDK_LARGE_PROMPT_BYTES = 128 * 1024
SDK_BYTES_PER_TOKEN = 10
SDK_KEEPALIVE_EXPIRY_S = 5.0  # the SDK's client closes a connection idle this long (httpx default)
# Every SDK session heartbeats: sleep this long, then one session_heartbeat with this timeout and no
# retry (tinker/lib/internal_client_holder.py); it warns after SDK_HEARTBEAT_WARNING_S without a success.
SDK_HEARTBEAT_PERIOD_S = 10.0
SDK_HEARTBEAT_TIMEOUT_S = 10.0
SDK_HEARTBEAT_WARNING_S = 120.0


def sdk_version(text: str) -> str:
    """The version of an SDK release named ``tinker==X.Y.Z``; ValueError in one line naming what is wrong."""
    name, sep, version = text.strip().partition("==")
    if name != SDK_PACKAGE or not sep:
        raise ValueError(f"sdk {text!r}: expected {SDK_PACKAGE}==X.Y.Z")
    if not RELEASE_VERSION.match(version):
        raise ValueError(f"sdk {text!r}: version {version!r} is not X.Y.Z")
    return version
