"""Which server a trial runs against, parsed from one string.

- ``skyrl==X.Y.Z``: that SkyRL release from PyPI, in its own venv (``tuft==X.Y.Z``: a TuFT release; every family of
  ``model.family`` is named so);
- ``skyrl@PATH``: a local SkyRL checkout, installed editable into its own venv (``tuft@PATH``);
- ``url=http://127.0.0.1:PORT``: a server someone else started, judged by SkyRL's contract;
  ``tuft+url=http://127.0.0.1:PORT``: one of another family, judged by that family's (its hold, its TTLs).
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from faultload.model.family import FAMILY_NAMES, TRAITS

DEFAULT_TARGET = "skyrl==0.4.0"
# Every form a target spec takes, for help texts and errors.
TARGET_FORMS = tuple(form for family in FAMILY_NAMES for form in (f"{family}==X.Y.Z", f"{family}@PATH")) + (
    "url=http(s)://HOST:PORT",
    "FAMILY+url=http(s)://HOST:PORT",
)
URL_FAMILY = "skyrl"  # the family a bare url= target is judged as
RELEASE_VERSION = re.compile(r"^\d+\.\d+\.\d+([.-]?(post|dev|rc|a|b)\d+)?$")


@dataclass(frozen=True)
class TargetSpec:
    kind: str  # "release" | "checkout" | "url"
    text: str
    version: str | None = None
    path: str | None = None
    url: str | None = None
    family: str = "skyrl"  # the server family (model.family.FAMILY_NAMES) it is of, whose contract judges it

    @property
    def venv_name(self) -> str:
        if self.kind == "release":
            return f"{self.family}-{self.version}"
        digest = hashlib.sha1(str(self.path).encode()).hexdigest()[:10]
        return f"{self.family}-checkout-{digest}"


def parse_target(text: str) -> TargetSpec:
    """Parse a target spec; ValueError with one line naming what is wrong."""
    text = text.strip()
    for family in FAMILY_NAMES:
        if text.startswith(f"{family}=="):
            version = text[len(family) + 2 :]
            if not RELEASE_VERSION.match(version):
                raise ValueError(f"target {text!r}: version {version!r} is not X.Y.Z")
            return TargetSpec("release", text, version=version, family=family)
        if text.startswith(f"{family}@"):
            path = os.path.abspath(os.path.expanduser(text[len(family) + 1 :]))
            if not os.path.isdir(path):
                raise ValueError(f"target {text!r}: {path} is not a directory")
            if not any(os.path.exists(os.path.join(path, f)) for f in ("pyproject.toml", "setup.py")):
                raise ValueError(f"target {text!r}: {path} has no pyproject.toml or setup.py (not a {family} checkout)")
            return TargetSpec("checkout", text, path=path, family=family)
    family, plus, rest = text.partition("+")
    if plus and rest.startswith("url="):
        if family not in FAMILY_NAMES:
            raise ValueError(f"target {text!r}: {family!r} is not a server family ({', '.join(FAMILY_NAMES)})")
        return _url_target(text, rest, family)
    if text.startswith("url="):
        return _url_target(text, text, URL_FAMILY)
    raise ValueError(f"target {text!r}: expected {' | '.join(TARGET_FORMS)}")


def _url_target(text: str, url_part: str, family: str) -> TargetSpec:
    url = url_part[len("url=") :].rstrip("/")
    parts = urlsplit(url)
    try:
        port = parts.port  # raises ValueError for a non-numeric or out-of-range port
    except ValueError:
        port = None
    if parts.scheme not in ("http", "https") or not parts.hostname or port is None or not 1 <= port <= 65535:
        raise ValueError(f"target {text!r}: expected url=http://HOST:PORT or url=https://HOST:PORT (PORT in 1-65535)")
    if parts.username or parts.password:
        raise ValueError(f"target {text!r}: no credentials in the URL (give the key with --api-key or TINKER_API_KEY)")
    return TargetSpec("url", text, url=url, family=family)


def is_loopback_host(host: str) -> bool:
    """True when ``host`` resolves only to 127.0.0.0/8 or ::1."""
    try:
        infos = socket.getaddrinfo(host, None)
    except socket.gaierror:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


def require_loopback(url: str, allow_remote: bool) -> None:
    host = urlsplit(url).hostname or ""
    if not allow_remote and not is_loopback_host(host):
        raise ValueError(f"{url} is not a loopback address; pass --allow-remote to load a remote server")


def serves_training(spec: TargetSpec) -> bool:
    """Whether a target's launch can answer training traffic (its family runs the null engine); a ``url=``
    target is someone else's server, which may."""
    return spec.kind == "url" or "null" in TRAITS[spec.family].engines
