"""The provider's discovery document and signing keys, fetched lazily and cached.

Nothing is fetched at app creation (no I/O in ``create_app``): the first login or bearer token does it,
with a bounded timeout. A failed fetch is remembered for :data:`RETRY_AFTER` seconds so a provider that is
down costs one timeout, not one per request. Keys (JWKS) are refreshed when a token names a key id that
is not known (key rotation), at most once per :data:`JWKS_MIN_INTERVAL`, and after :data:`JWKS_MAX_AGE`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from joserfc.errors import JoseError
from joserfc.jwk import KeySet

TIMEOUT = 5.0            # seconds per provider request (discovery, JWKS, token endpoint)
RETRY_AFTER = 10.0       # after a failed fetch, fail fast for this long
JWKS_MIN_INTERVAL = 30.0  # unknown key ids refresh the key set at most this often
JWKS_MAX_AGE = 3600.0
MAX_DOCUMENT_BYTES = 1024 * 1024
REQUIRED = ("issuer", "authorization_endpoint", "token_endpoint", "jwks_uri")

FetchJson = Callable[[str, float], Any]


class ProviderUnavailable(Exception):
    """Discovery or keys could not be had; the message names the URL and reason, never a credential."""


def fetch_json(url: str, timeout: float) -> Any:
    """GET a JSON document (bounded in time and size)."""
    import requests

    try:
        with requests.get(url, timeout=timeout, stream=True, headers={"Accept": "application/json"}) as response:
            if response.status_code != 200:
                raise ProviderUnavailable(f"{url} answered {response.status_code}")
            body = response.raw.read(MAX_DOCUMENT_BYTES + 1, decode_content=True)
    except requests.RequestException as exc:
        raise ProviderUnavailable(f"{url}: {type(exc).__name__}") from None
    if len(body) > MAX_DOCUMENT_BYTES:
        raise ProviderUnavailable(f"{url}: document larger than {MAX_DOCUMENT_BYTES} bytes")
    try:
        import json

        return json.loads(body)
    except ValueError:
        raise ProviderUnavailable(f"{url}: not JSON") from None


def well_known_url(issuer: str) -> str:
    return issuer.rstrip("/") + "/.well-known/openid-configuration"


class Discovery:
    """Provider metadata and key set of one issuer."""

    def __init__(self, issuer: str, *, fetch: FetchJson = fetch_json, timeout: float = TIMEOUT,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.issuer = issuer
        self._fetch = fetch
        self._timeout = timeout
        self._clock = clock
        self._lock = threading.Lock()
        self._metadata: dict[str, Any] | None = None
        self._keys: KeySet | None = None
        self._keys_at = -1e18
        self._failed_at = -1e18
        self._failure = ""

    # ------------------------------------------------------------------ metadata
    def metadata(self) -> dict[str, Any]:
        if self._metadata is not None:
            return self._metadata
        with self._lock:
            if self._metadata is None:
                self._fail_fast()
                try:
                    self._metadata = self._load_metadata()
                except ProviderUnavailable as exc:
                    self._remember(exc)
                    raise
            return self._metadata

    def _load_metadata(self) -> dict[str, Any]:
        document = self._fetch(well_known_url(self.issuer), self._timeout)
        if not isinstance(document, dict):
            raise ProviderUnavailable("the discovery document is not a JSON object")
        missing = [name for name in REQUIRED if not isinstance(document.get(name), str)]
        if missing:
            raise ProviderUnavailable(f"the discovery document lacks {', '.join(missing)}")
        if document["issuer"].rstrip("/") != self.issuer.rstrip("/"):
            raise ProviderUnavailable(f"the discovery document names issuer {document['issuer']!r}, "
                                      f"not the configured {self.issuer!r}")
        for name in ("authorization_endpoint", "token_endpoint", "jwks_uri", "end_session_endpoint"):
            if name in document and urlsplit(str(document[name])).scheme not in ("http", "https"):
                raise ProviderUnavailable(f"the discovery document's {name} is not an http(s) URL")
        return document

    # ------------------------------------------------------------------ keys
    def keys(self, *, unknown_kid: bool = False) -> KeySet:
        """The key set; ``unknown_kid`` asks for a refresh (granted at most every JWKS_MIN_INTERVAL)."""
        now = self._clock()
        stale = now - self._keys_at > JWKS_MAX_AGE
        wanted = unknown_kid and now - self._keys_at >= JWKS_MIN_INTERVAL
        if self._keys is not None and not stale and not wanted:
            return self._keys
        metadata = self.metadata()
        with self._lock:
            if self._keys is not None and self._keys_at >= now:   # another greenlet just refreshed
                return self._keys
            try:
                self._keys = self._load_keys(str(metadata["jwks_uri"]))
                self._keys_at = self._clock()
            except ProviderUnavailable:
                if self._keys is None:
                    raise
                self._keys_at = self._clock()   # keep the old keys; retry after the interval
            return self._keys

    def _load_keys(self, url: str) -> KeySet:
        document = self._fetch(url, self._timeout)
        if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
            raise ProviderUnavailable("the JWKS document has no keys list")
        usable = [key for key in document["keys"] if isinstance(key, dict) and key.get("use", "sig") == "sig"
                  and key.get("kty") in ("RSA", "EC", "OKP")]
        try:
            return KeySet.import_key_set({"keys": usable})
        except (JoseError, ValueError, TypeError) as exc:
            raise ProviderUnavailable(f"the JWKS document holds a key that cannot be read ({exc})") from None

    # ------------------------------------------------------------------ failures
    def _fail_fast(self) -> None:
        if self._clock() - self._failed_at < RETRY_AFTER:
            raise ProviderUnavailable(f"{self._failure} (not retried for {RETRY_AFTER:.0f} s)")

    def _remember(self, exc: ProviderUnavailable) -> None:
        self._failed_at = self._clock()
        self._failure = str(exc)
