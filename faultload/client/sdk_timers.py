"""The tinker SDK's own connection timers, scaled with the trial like the server's.

At time scale s the server's keep-alive is s times shorter; the SDK's idle-connection timers, left as they
are, would outlast it and the client would reuse connections the server is closing: resets full time never
has. :class:`faultload.client.sdk_wire.installed` applies both while the SDK client runs.
"""

from __future__ import annotations

import functools
import inspect
from typing import Callable

import httpx
import pyqwest

from faultload.model.timescale import trial_s


def scaled_limits(limits: httpx.Limits, time_scale: float) -> httpx.Limits:
    """The SDK's connection limits with the idle-connection expiry scaled like every other timer.

    At time scale s the server's keep-alive (uvicorn's 75 s) is s times
    shorter; the SDK's 5 s idle expiry, left as it is, would then outlast it
    (at 0.05: 3.75 s against 5 s), and the client would reuse connections
    the server is closing — a reset that full time never has (the nightly
    profile found it: 5 resets in 15,005 attempts with no fault).
    """
    expiry = limits.keepalive_expiry
    return httpx.Limits(
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=None if expiry is None else trial_s(expiry, time_scale),
    )


# pyqwest's pool idle timeout when the SDK builds its transport (it passes none: the default, 90 s)
PYQWEST_IDLE_TIMEOUT_S = float(inspect.signature(pyqwest.HTTPTransport).parameters["pool_idle_timeout"].default)


def scaled_pyqwest_transport(
    build: Callable[[], httpx.AsyncBaseTransport], time_scale: float
) -> Callable[[], httpx.AsyncBaseTransport]:
    """The SDK's pyqwest transport builder, its pool idle timeout scaled like the server's keep-alive.

    The SDK samples through pyqwest (reqwest) unless the server turns it off,
    and SkyRL's client config does not: idle connections live 90 s there
    against uvicorn's 75 s keep-alive. Scaled, the two keep that order (4.5 s
    against 3.75 s at 0.05); unscaled, the client would hold connections 24×
    past the server's close — resets that full time does not have (the
    nightly profile saw 5 in 15,005 attempts with no fault).
    """
    idle_s = trial_s(PYQWEST_IDLE_TIMEOUT_S, time_scale)

    def scaled() -> httpx.AsyncBaseTransport:
        real = pyqwest.HTTPTransport
        pyqwest.HTTPTransport = functools.partial(real, pool_idle_timeout=idle_s)  # what the SDK's builder calls
        try:
            return build()
        finally:
            pyqwest.HTTPTransport = real

    return scaled
