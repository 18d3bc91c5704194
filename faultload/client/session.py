"""Open a Tinker session and a sampling session, as the SDK does before sampling."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from urllib.parse import urlsplit

from faultload.model.access import Access, tls_for
from faultload.model.sdk import SDK_RELEASES
from faultload.version import CLIENT_VERSION


class SessionError(RuntimeError):
    pass


class SessionUnreadable(SessionError):
    """The server answered a session call with what the SDK cannot read: the server's fault, said before any
    load (no SDK client could sample on it)."""

    def verdict_line(self) -> str:
        """How every command says it: a failure of the server, never a harness error."""
        return f"the server is at fault before any load: {self}"


class AccessRefused(SessionError):
    """The server refused the key (401, 403): said before any load, never a verdict on the server."""


def _post(url: str, body: dict, timeout_s: float, access: Access) -> dict:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **dict(access.header_items())},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=tls_for(url, access)) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise AccessRefused(
                f"the server refused the API key (HTTP {exc.code} at {urlsplit(url).path}): "
                "give its key with --api-key or TINKER_API_KEY"
            ) from None
        raise SessionError(f"POST {url} failed: {exc}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise SessionError(f"POST {url} failed: {exc}") from None


def open_sampling_session(base_url: str, base_model: str, timeout_s: float = 30.0, access: Access = Access()) -> str:
    """Create a session and a base-model sampling session; return the sampling session id."""
    session = _post(
        f"{base_url}/api/v1/create_session",
        {"tags": ["faultload"], "user_metadata": {}, "sdk_version": CLIENT_VERSION},
        timeout_s,
        access,
    )
    sampling = _post(
        f"{base_url}/api/v1/create_sampling_session",
        {"session_id": session["session_id"], "sampling_session_seq_id": 0, "base_model": base_model},
        timeout_s,
        access,
    )
    if not isinstance(sampling, dict) or not isinstance(sampling.get("sampling_session_id"), str):
        raise SessionUnreadable(
            "the server answered create_sampling_session without the sampling_session_id the SDK reads "
            f"(every tinker release fails on it: APIResponseValidationError): {json.dumps(sampling)[:300]}"
        )
    return sampling["sampling_session_id"]


def retrieve_futures_advertised(base_url: str, timeout_s: float = 10.0, access: Access = Access()) -> bool | None:
    """Whether the server's client config turns on the newest SDK's per-session ``/api/v1/retrieve_futures``
    polling (``sample_use_retrieve_futures``, read by tinker 0.38); None when it did not say (no answer)."""
    try:
        config = _post(f"{base_url}/api/v1/client/config", {"sdk_version": SDK_RELEASES[-1]}, timeout_s, access)
    except AccessRefused:
        raise
    except SessionError:
        return None
    return bool(config.get("sample_use_retrieve_futures", False)) if isinstance(config, dict) else None
