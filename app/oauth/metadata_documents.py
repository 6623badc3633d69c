"""Client-metadata documents: a ``client_id`` that is an ``https`` URL names a JSON document the client
publishes about itself; the service fetches it (instead of the client registering) and trusts it because
only the owner of that host can publish it.

Fetching a URL that anyone can choose is a way into the service's own network, so every fetch:

- resolves the host once (gevent's cooperative resolver) and refuses when *any* address it resolves to is
  refused by the address policy (:func:`app.oauth.addresses.public_only`: private, loopback, link-local,
  carrier-grade NAT, …), before a connection is opened; then connects to one of those checked addresses
  (never resolving again, so a second DNS answer cannot swap in another address), with TLS whose SNI
  and certificate check use the URL's host name;
- is cut after 5 seconds in total (DNS, connect, TLS, headers and body together, however slowly the
  server sends), and reads at most 5 KB of body (a larger ``Content-Length`` is refused before the body
  is read; without one, the read stops one byte past the cap);
- follows at most 3 redirects, each hop checked as the first (https, resolution, address policy).

The document must be a JSON object whose ``client_id`` equals the URL, with ``redirect_uris``; a
``client_secret_*`` authentication method (or any but ``none``) or a ``client_secret`` is refused: these
clients are public. Answers (the client, or why it cannot be used) are kept 1 hour (failures 30 seconds),
at most :data:`CACHE_SIZE` URLs; concurrent lookups of one URL share one fetch, and at most
:data:`MAX_CONCURRENT` fetches run at once.

The address policy, resolver and TLS context are constructor parameters for the tests (a local HTTPS
server with its own CA); the service always builds the fetcher with the defaults.
"""

from __future__ import annotations

import http.client
import json
import logging
import socket
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin, urlsplit

import gevent
import gevent.ssl
from gevent import socket as gsocket
from gevent.event import AsyncResult
from gevent.lock import BoundedSemaphore

from app.oauth.addresses import AddressPolicy, IPAddress, parse_address, public_only, redirect_uri_problem
from app.oauth.clients import OAuthClient, UnknownClient

log = logging.getLogger(__name__)

TIMEOUT = 5.0            # seconds for a whole fetch, redirects included
MAX_BYTES = 5 * 1024     # body bytes of a document
MAX_REDIRECTS = 3
CACHE_TTL = 3600.0       # a usable document is kept this long
FAILURE_TTL = 30.0       # an unusable one this long (a fixed document is seen again soon; retries stay cheap)
CACHE_SIZE = 512         # URLs remembered
MAX_CONCURRENT = 8       # fetches running at once (others wait their turn within their own timeout)
MAX_URL = 2000
MAX_ADDRESSES = 16       # resolved addresses looked at (all checked, tried in order)
MAX_REDIRECT_URIS = 16
MAX_NAME = 200
GRANT_TYPES = ("authorization_code", "refresh_token")
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
USER_AGENT = "shoal (OAuth client metadata)"

# Resolves (host, port) to addresses; the default is gevent's cooperative getaddrinfo.
Resolver = Callable[[str, int], list[IPAddress]]


def client_id_url_problem(url: str) -> str | None:
    """Why ``url`` cannot name a metadata document, or None: https, a host, a path other than ``/``, no
    fragment, no user name or password, no ``.``/``..`` segments."""
    if len(url) > MAX_URL or any(ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in url):
        return f"a client_id URL must be at most {MAX_URL} characters without spaces or control characters"
    if not url.isascii():
        return "a client_id URL must be ASCII (an international host name in its xn-- form, the path %-encoded)"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError:
        return "the client_id is not a valid URL"
    if parts.scheme != "https" or not parts.hostname:
        return "a client_id URL must be an https URL with a host"
    if "@" in parts.netloc:
        return "a client_id URL must not contain a user name or password"
    if "#" in url:
        return "a client_id URL must not contain a fragment"
    if parts.path in ("", "/"):
        return "a client_id URL must have a path (the document's own address, not the site's root)"
    if any(segment in (".", "..") for segment in parts.path.split("/")):
        return "a client_id URL must not contain '.' or '..' path segments"
    return None


def _default_resolver(host: str, port: int) -> list[IPAddress]:
    found: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in gsocket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        address = parse_address(str(sockaddr[0]))
        if address is not None and address not in found:
            found.append(address)
    return found


class DocumentRefused(Exception):
    """A fetch that cannot give a document; ``str()`` says why (for :class:`UnknownClient`)."""


class DocumentFetcher:
    """Fetches, checks and caches client-metadata documents (one per app)."""

    def __init__(self, *, address_policy: AddressPolicy = public_only, resolver: Resolver | None = None,
                 ssl_context: ssl.SSLContext | None = None, timeout: float = TIMEOUT, max_bytes: int = MAX_BYTES,
                 max_redirects: int = MAX_REDIRECTS, cache_ttl: float = CACHE_TTL, failure_ttl: float = FAILURE_TTL,
                 cache_size: int = CACHE_SIZE, max_concurrent: int = MAX_CONCURRENT,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._policy = address_policy
        self._resolve = resolver or _default_resolver
        self._ssl_given = ssl_context   # None: the system's trust store, loaded at the first fetch
        self.timeout, self.max_bytes, self.max_redirects = timeout, max_bytes, max_redirects
        self._cache_ttl, self._failure_ttl, self._cache_size = cache_ttl, failure_ttl, cache_size
        self._clock = clock
        self._cache: OrderedDict[str, tuple[float, OAuthClient | str]] = OrderedDict()
        self._inflight: dict[str, AsyncResult] = {}
        self._slots = BoundedSemaphore(max_concurrent)
        self.fetches = 0   # fetches started (tests: a cached answer starts none)

    @property
    def _ssl(self) -> ssl.SSLContext:
        if self._ssl_given is None:
            self._ssl_given = _default_context()
        return self._ssl_given

    # ------------------------------------------------------------------ the client
    def client(self, url: str) -> OAuthClient:
        """The client the document at ``url`` describes; :class:`UnknownClient` saying why not."""
        problem = client_id_url_problem(url)
        if problem is not None:
            raise UnknownClient(problem)
        now = self._clock()
        cached = self._cache.get(url)
        if cached is not None and cached[0] > now:
            self._cache.move_to_end(url)
            return _answer(cached[1])
        waiting = self._inflight.get(url)
        if waiting is not None:   # another greenlet is fetching it: share its answer
            return _answer(waiting.get())
        result = AsyncResult()
        self._inflight[url] = result
        try:
            answer = self._fetch_client(url)
            ttl = self._cache_ttl if isinstance(answer, OAuthClient) else self._failure_ttl
            self._cache[url] = (self._clock() + ttl, answer)
            self._cache.move_to_end(url)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
            result.set(answer)
        except BaseException as exc:
            result.set(f"the client's metadata document could not be fetched ({type(exc).__name__})")
            raise
        finally:
            self._inflight.pop(url, None)
        return _answer(answer)

    def _fetch_client(self, url: str) -> OAuthClient | str:
        """The client, or the reason (as the text shown to the human)."""
        began = time.monotonic()
        if not self._slots.acquire(timeout=self.timeout):
            return f"the client's metadata document at {url} was not fetched: too many fetches are running"
        try:
            self.fetches += 1
            body = self._fetch(url, deadline=began + self.timeout)
            return parse_document(url, body)
        except DocumentRefused as exc:
            log.info("client metadata document refused", extra={"client_id": url, "reason": str(exc)})
            return f"the client's metadata document at {url} could not be used: {exc}"
        finally:
            self._slots.release()

    # ------------------------------------------------------------------ the fetch
    def _fetch(self, url: str, deadline: float) -> bytes:
        """The body of the document at ``url`` (after at most ``max_redirects`` redirects)."""
        timer = gevent.Timeout(max(0.0, deadline - time.monotonic()))
        timer.start()
        try:
            current = url
            for _hop in range(self.max_redirects + 1):
                status, location, body = self._get(current, deadline)
                if status not in REDIRECT_STATUSES:
                    if status != 200:
                        raise DocumentRefused(f"{current} answered HTTP {status}")
                    return body
                if not location:
                    raise DocumentRefused(f"{current} answered HTTP {status} without a Location")
                current = urljoin(current, location)
            raise DocumentRefused(f"more than {self.max_redirects} redirects")
        except gevent.Timeout as exc:
            if exc is not timer:
                raise
            raise DocumentRefused(f"no complete answer within {self.timeout:g} seconds") from None
        finally:
            timer.close()

    def _get(self, url: str, deadline: float) -> tuple[int, str | None, bytes]:
        """One GET: status, ``Location`` of a redirect, and the body of a 200 (bounded)."""
        try:
            parts = urlsplit(url)
            port = parts.port or 443
        except ValueError:
            raise DocumentRefused(f"{url[:200]!r} is not a valid URL") from None
        host = parts.hostname
        if parts.scheme != "https" or not host or "@" in parts.netloc or len(url) > MAX_URL or not url.isascii():
            raise DocumentRefused(f"{url[:200]} is not an https URL with a host (redirects must stay on https)")
        addresses = self._addresses(host, port)
        sock = self._connect(host, port, addresses, deadline)
        connection = http.client.HTTPSConnection(host, port, timeout=_left(deadline), context=self._ssl)
        connection.sock = sock   # connected and checked here: http.client must not resolve or connect again
        try:
            target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            connection.request("GET", target, headers={"Accept": "application/json", "User-Agent": USER_AGENT,
                                                       "Connection": "close"})
            response = connection.getresponse()
            if response.status in REDIRECT_STATUSES:
                return response.status, response.getheader("Location"), b""
            if response.status != 200:
                return response.status, None, b""
            length = response.getheader("Content-Length")
            if length is not None and length.strip().isdigit() and int(length) > self.max_bytes:
                raise DocumentRefused(f"the document is {int(length)} bytes, more than the {self.max_bytes} allowed")
            body = response.read(self.max_bytes + 1)
            if len(body) > self.max_bytes:
                raise DocumentRefused(f"the document is more than the {self.max_bytes} bytes allowed")
            return 200, None, body
        except (OSError, ValueError, http.client.HTTPException) as exc:   # ValueError: e.g. a bad header value
            raise DocumentRefused(f"{host} answered no valid HTTP response ({type(exc).__name__})") from None
        finally:
            connection.close()

    def _addresses(self, host: str, port: int) -> list[IPAddress]:
        """Every address ``host`` resolves to (once), all allowed by the policy; else :class:`DocumentRefused`."""
        literal = parse_address(host)
        if literal is not None:
            addresses = [literal]
        else:
            try:
                addresses = self._resolve(host, port)[:MAX_ADDRESSES]
            except (OSError, UnicodeError) as exc:
                raise DocumentRefused(f"{host} could not be resolved ({type(exc).__name__})") from None
        if not addresses:
            raise DocumentRefused(f"{host} resolves to no address")
        for address in addresses:
            why = self._policy(address)
            if why is not None:
                raise DocumentRefused(f"{host} resolves to {address}, {why}, which the service does not fetch from")
        return addresses

    def _connect(self, host: str, port: int, addresses: list[IPAddress], deadline: float) -> Any:
        """A TLS connection to the first of ``addresses`` that answers, checked against ``host``."""
        errors: list[str] = []
        for address in addresses:
            family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
            raw = gsocket.socket(family, socket.SOCK_STREAM)
            try:
                raw.settimeout(_left(deadline))
                raw.connect((str(address), port))
            except OSError as exc:
                raw.close()
                errors.append(f"{address}: {type(exc).__name__}")
                continue
            try:
                return self._ssl.wrap_socket(raw, server_hostname=host)
            except (OSError, ValueError) as exc:
                raw.close()
                reason = getattr(exc, "verify_message", None) or type(exc).__name__
                raise DocumentRefused(f"TLS with {host} failed ({reason})") from None
        raise DocumentRefused(f"{host} could not be reached ({'; '.join(errors[:3])})")


def parse_document(url: str, body: bytes) -> OAuthClient:
    """The client a document describes; :class:`DocumentRefused` when the document is not usable."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise DocumentRefused("the document is not JSON") from None
    if not isinstance(document, dict):
        raise DocumentRefused("the document is not a JSON object")
    if document.get("client_id") != url:
        raise DocumentRefused("the document's client_id is not its own URL")
    method = document.get("token_endpoint_auth_method", "none")
    if isinstance(method, str) and method.startswith("client_secret"):
        raise DocumentRefused(f"token_endpoint_auth_method {method!r} needs a shared secret; these clients are public "
                      "('none')")
    if method != "none":
        raise DocumentRefused(f"token_endpoint_auth_method {str(method)[:60]!r} is not supported (only 'none')")
    if "client_secret" in document:
        raise DocumentRefused("the document contains a client_secret")
    redirect_uris = document.get("redirect_uris")
    if not isinstance(redirect_uris, list) or not redirect_uris or len(redirect_uris) > MAX_REDIRECT_URIS:
        raise DocumentRefused(f"redirect_uris must be a list of 1 to {MAX_REDIRECT_URIS} URLs")
    for uri in redirect_uris:
        problem = redirect_uri_problem(uri)
        if problem is not None:
            raise DocumentRefused(problem)
    grant_types = document.get("grant_types", list(GRANT_TYPES))
    if (not isinstance(grant_types, list) or "authorization_code" not in grant_types
            or not set(grant_types) <= set(GRANT_TYPES)):
        raise DocumentRefused("grant_types must include authorization_code and may add only refresh_token")
    response_types = document.get("response_types", ["code"])
    if response_types != ["code"]:
        raise DocumentRefused('response_types must be ["code"]')
    name = document.get("client_name")
    if name is not None and (not isinstance(name, str) or len(name) > MAX_NAME
                             or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name)):
        raise DocumentRefused(f"client_name must be text of at most {MAX_NAME} characters")
    return OAuthClient(client_id=url, client_name=name or None, redirect_uris=tuple(redirect_uris), verified=True,
                       token_endpoint_auth_method="none", grant_types=tuple(dict.fromkeys(grant_types)))


def _answer(answer: OAuthClient | str) -> OAuthClient:
    if isinstance(answer, OAuthClient):
        return answer
    raise UnknownClient(answer)


def _left(deadline: float) -> float:
    return max(0.01, deadline - time.monotonic())


def _default_context() -> ssl.SSLContext:
    context: ssl.SSLContext = gevent.ssl.create_default_context()
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context
