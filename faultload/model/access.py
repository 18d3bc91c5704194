"""How the load reaches a server: its API key, extra headers and TLS trust, as one value.

A server someone else runs (a ``url=`` target) may check keys, sit behind a
gateway that wants headers, and speak TLS. The key is a secret: it is never
part of a trial's config (so never in a report, repro, bundle or log), and
this value's ``repr`` hides it. Launched servers authorize faultload's own key
(:data:`faultload.model.sdk.SDK_API_KEY`), the default. Stdlib only: load
workers receive it pickled, inside their job.
"""

from __future__ import annotations

import os
import re
import ssl
from dataclasses import dataclass

from faultload.model.sdk import SDK_API_KEY

API_KEY_HEADER = "X-API-Key"  # the tinker SDK's header
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # an HTTP header name (RFC 9110 token)


@dataclass(frozen=True)
class Access:
    api_key: str = SDK_API_KEY
    headers: tuple[tuple[str, str], ...] = ()  # extra request headers, in order
    ca_cert: str | None = None  # a PEM file of CA certificates to trust (https); None: the system's
    insecure: bool = False  # https without verifying the certificate

    def __repr__(self) -> str:  # never the key, nor a header's value (a gateway token is a secret too)
        names = ", ".join(name for name, _ in self.headers)
        return (
            f"Access(api_key=<{'default' if self.api_key == SDK_API_KEY else 'given'}>, headers=[{names}], "
            f"ca_cert={self.ca_cert!r}, insecure={self.insecure})"
        )

    __str__ = __repr__

    def validate(self) -> "Access":
        """ValueError in one line for a header that is not one, a key with a line break, a CA file missing."""
        if not self.api_key or any(c in self.api_key for c in "\r\n"):
            raise ValueError("--api-key: empty, or holds a line break")
        for name, value in self.headers:
            if not _TOKEN.match(name):
                raise ValueError(f"--header {name!r}: not an HTTP header name")
            if any(c in value for c in "\r\n"):
                raise ValueError(f"--header {name}: its value holds a line break")
            if name.lower() in ("host", "content-length", "content-type", API_KEY_HEADER.lower()):
                raise ValueError(
                    f"--header {name}: set by faultload itself"
                    + (
                        " (give the key with --api-key or TINKER_API_KEY)"
                        if name.lower() == API_KEY_HEADER.lower()
                        else ""
                    )
                )
        if self.ca_cert is not None and not os.path.isfile(self.ca_cert):
            raise ValueError(f"--ca-cert {self.ca_cert}: no such file")
        return self

    def header_items(self) -> list[tuple[str, str]]:
        """The key's header, then the extra headers."""
        return [(API_KEY_HEADER, self.api_key), *self.headers]

    def header_block(self) -> bytes:
        """The same as ``Name: value\\r\\n`` lines, for the raw client's pre-encoded requests."""
        return b"".join(f"{name}: {value}\r\n".encode("latin-1") for name, value in self.header_items())

    def ssl_context(self) -> ssl.SSLContext:
        """The TLS context an https connection uses: the CA file's (else the system's) trust, or none checked."""
        context = ssl.create_default_context(cafile=self.ca_cert)
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context


def parse_header(text: str) -> tuple[str, str]:
    """``NAME:VALUE`` (``--header``) as (name, value); ValueError in one line otherwise."""
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise ValueError(f"--header {text!r}: expected NAME:VALUE")
    return name.strip(), value.strip()


def access_for(
    url: str | None,
    *,
    api_key: str | None,
    env_api_key: str | None,
    headers: list[str],
    ca_cert: str | None,
    insecure: bool,
    sdk_client: bool,
    prefix: str = "--",
) -> Access:
    """How the load reaches a target (``url``: a url= target's, None for a server faultload launches), from
    the options (named with ``prefix``: ``--`` for the CLI, ``--faultload-`` for pytest) and the
    environment's ``TINKER_API_KEY`` (``env_api_key``). A launched server authorizes faultload's own key: the
    options are refused for it, the variable ignored. ValueError in one line on bad input."""
    given = [
        name
        for name, value in (("api-key", api_key), ("header", headers), ("ca-cert", ca_cert), ("insecure", insecure))
        if value
    ]
    if url is None:
        if given:
            raise ValueError(
                f"{prefix}{given[0]}: only for a url= target (a server faultload launches takes its own key)"
            )
        return Access()
    if not url.startswith("https://") and (ca_cert or insecure):
        raise ValueError(f"{prefix}{'ca-cert' if ca_cert else 'insecure'}: the target is http, not https")
    if insecure and sdk_client:
        raise ValueError(f"{prefix}insecure: the sdk client always checks certificates; give {prefix}ca-cert instead")
    key = api_key or env_api_key
    return Access(
        **({"api_key": key} if key else {}),
        headers=tuple(parse_header(h) for h in headers),
        ca_cert=ca_cert,
        insecure=insecure,
    ).validate()


def tls_for(url: str, access: Access) -> ssl.SSLContext | None:
    """The TLS context for ``url`` (None for plain http)."""
    return access.ssl_context() if url.startswith("https://") else None
