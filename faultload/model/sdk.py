"""The tinker SDK's and SkyRL's own timers (SDK seconds, before a trial's time scale), stated once.

Retention and keep-alive bugs live on these landmarks; ``ClientPolicy``'s
defaults, the strategies' limits and the suite's trial labels all read them
from here. ``tests/test_sdk_constants.py`` reads the installed SDK so a drift is caught.
"""

SDK_SUBMIT_CONCURRENCY = 400  # asample POSTs in flight per client holder
SDK_POLL_TIMEOUT_S = 45.0  # retrieve_future client timeout
SDK_REQUEST_TIMEOUT_S = 60.0  # the SDK's default HTTP timeout (asample and every call without its own)
SDK_BACKOFF_CAP_S = 30.0  # connection-error backoff cap; also the store's sweep interval
SDK_CONNECTION_RETRIES = 16  # connection-error retries
SDK_KEEPALIVE_EXPIRY_S = 5.0  # the SDK's client closes a connection idle this long (httpx default)
RETRIEVED_TTL_S = 300.0  # a retrieved result is kept this long (pre-fix: 120 s)
COMPLETED_TTL_S = 600.0  # a completed, never-retrieved result is kept this long
