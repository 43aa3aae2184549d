"""Where the model is asked, and with which key: ``ANTHROPIC_BASE_URL`` and ``ANTHROPIC_API_KEY``.

The base URL must be https, except on loopback (for gateways on the same host
and for tests). A blank key counts as absent. The key is never printed.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

from sandbx._value import value
from sandbx.errors import SandbxError

DEFAULT_BASE_URL = "https://api.anthropic.com"
_LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


class MissingKey(SandbxError):
    def __init__(self) -> None:
        super().__init__(
            "no Anthropic API key",
            "export ANTHROPIC_API_KEY=…, or store one with `sandbx auth login`",
        )


class BaseUrlRefused(SandbxError):
    def __init__(self, url: str, why: str) -> None:
        super().__init__(
            f"ANTHROPIC_BASE_URL {url!r} refused: {why}",
            "use an https:// URL, or http:// on loopback (127.0.0.1, ::1, localhost)",
        )


@value
class Endpoint:
    base_url: str
    api_key: str

    def __repr__(self) -> str:
        return f"Endpoint(base_url={self.base_url!r}, api_key=<hidden>)"


def endpoint_from(environ: Mapping[str, str], key: str | None) -> Endpoint:
    """``key`` as the key store found it (environment first, then the file); None: there is none."""
    if not key:
        raise MissingKey
    return Endpoint(base_url=vet_base_url(environ.get("ANTHROPIC_BASE_URL", "")), api_key=key)


def vet_base_url(url: str) -> str:
    if not url.strip():
        return DEFAULT_BASE_URL
    parts = urlsplit(url.strip())
    host = (parts.hostname or "").lower()
    if parts.scheme == "https" and host:
        return url.strip().rstrip("/")
    if parts.scheme == "http" and (host in _LOOPBACK_HOSTS or host.startswith("127.")):
        return url.strip().rstrip("/")
    raise BaseUrlRefused(url, "not https, and not on loopback")
