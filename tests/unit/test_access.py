"""Reaching a deployed server: its API key, extra headers and TLS (``faultload.model.access``), on values.

The key is a secret: never in a report, a bundle, a log or a line the CLI prints. Against a real key-checking
server behind real TLS (TuFT 0.2.2 behind stunnel): ``tests/integration/test_access_integration.py``.
"""

from __future__ import annotations

import pytest

from faultload.model.access import Access, parse_header
from faultload.model.target import parse_target

KEY = "tml-faultload-test-secret-7f3a"


def test_the_key_and_header_values_never_show_in_the_values_repr() -> None:
    access = Access(api_key=KEY, headers=(("X-Gateway", "tok-123"),))
    assert KEY not in repr(access) and "tok-123" not in repr(access) and KEY not in str(access)
    assert "X-Gateway" in repr(access) and "<given>" in repr(access)
    assert "<default>" in repr(Access())
    assert access.header_block() == f"X-API-Key: {KEY}\r\nX-Gateway: tok-123\r\n".encode()


@pytest.mark.parametrize(
    ("access", "needle"),
    [
        (Access(headers=(("bad name", "x"),)), "not an HTTP header name"),
        (Access(headers=(("X-A", "a\r\nb"),)), "line break"),
        (Access(headers=(("X-API-Key", "x"),)), "--api-key or TINKER_API_KEY"),
        (Access(api_key="a\nb"), "line break"),
        (Access(ca_cert="/nonexistent.pem"), "no such file"),
    ],
)
def test_bad_access_is_one_line(access, needle) -> None:
    with pytest.raises(ValueError, match=needle):
        access.validate()


def test_headers_parse_and_https_targets_are_taken_without_credentials() -> None:
    assert parse_header("X-Team: infra") == ("X-Team", "infra")
    with pytest.raises(ValueError, match="NAME:VALUE"):
        parse_header("nocolon")
    assert parse_target("tuft+url=https://127.0.0.1:8443").url == "https://127.0.0.1:8443"
    with pytest.raises(ValueError, match="no credentials in the URL"):
        parse_target("url=https://user:pw@127.0.0.1:8443")
