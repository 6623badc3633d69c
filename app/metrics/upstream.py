"""The HTTP client of the configured Prometheus: safe URLs, bounded time and size, one error type.

Why bounded: the proxy runs in the one gevent worker that serves everything. ``requests`` is cooperative
once gevent has patched sockets, but a slow or huge answer would still hold a connection and memory, so
every call has a total deadline (30 s, a ``gevent.Timeout`` over connect + headers + body, on top of the
per-socket timeouts) and the body is read in chunks up to a cap (10 MiB, decoded size).

URLs: the configured ``prometheus.url`` keeps its path prefix (``http://host/prom`` →
``http://host/prom/api/v1/query``); only fixed API paths are appended, path segments taken from the request
(a label name) are percent-encoded whole, and parameters are form-encoded from a list of pairs: nothing a
client sends can change the host, the path or add a parameter it was not allowed to. Redirects are not
followed (a 3xx is a non-2xx answer).

Errors are :class:`UpstreamError` with the catalogue code: ``MTR002`` (unreachable, timed out, non-2xx
with Prometheus's own ``error`` text, too large) or ``MTR007`` (the request could not be built).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, urlencode, urlsplit, urlunsplit

import gevent
import requests
from requests.adapters import HTTPAdapter

TOTAL_TIMEOUT: Final = 30.0
CONNECT_TIMEOUT: Final = 5.0
MAX_BYTES: Final = 10 * 1024 * 1024
CHUNK: Final = 64 * 1024
POOL_SIZE: Final = 64                 # one per metrics stream at the cap
_MESSAGE_CHARS: Final = 500

Params = Sequence[tuple[str, str]]


@dataclass(frozen=True, slots=True)
class Limits:
    total_timeout: float = TOTAL_TIMEOUT
    connect_timeout: float = CONNECT_TIMEOUT
    max_bytes: int = MAX_BYTES


@dataclass(frozen=True, slots=True)
class Sample:
    labels: dict[str, str]
    value: float


class UpstreamError(Exception):
    """A Prometheus call that gave no usable answer; ``code`` is the problem code to answer with and
    ``error_type`` Prometheus's own ``errorType`` when it sent one."""

    def __init__(self, code: str, detail: str, error_type: str | None = None) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail
        self.error_type = error_type


def build_url(base_url: str, segments: Sequence[str], params: Params = ()) -> str:
    """``base_url`` + ``/segment/...`` (each percent-encoded whole, ``/`` included) + the encoded params.

    :raises UpstreamError: MTR007 when the base is no http(s) URL with a host or a segment cannot be encoded.
    """
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise UpstreamError("MTR007", "The configured Prometheus URL is not an http(s) URL with a host.")
    try:
        path = parts.path.rstrip("/") + "".join("/" + quote(segment, safe="") for segment in segments)
        query = urlencode(list(params))
    except UnicodeError as exc:
        raise UpstreamError("MTR007", f"The request to Prometheus cannot be encoded: {exc}.") from None
    return urlunsplit((parts.scheme, parts.netloc, path, query, ""))


class PrometheusClient:
    """One configured Prometheus. ``get`` returns the raw body of a 2xx answer; ``get_json`` decodes it."""

    def __init__(self, base_url: str, limits: Limits | None = None, session: requests.Session | None = None
                 ) -> None:
        self.base_url = base_url
        self.limits = limits or Limits()
        self._session = session or _session()

    def get(self, segments: Sequence[str], params: Params = ()) -> bytes:
        """GET ``base/segments?params`` within the limits.

        :raises UpstreamError: MTR002 or MTR007, with a message fit for a client (no host names)."""
        url = build_url(self.base_url, segments, params)
        limits = self.limits
        deadline = gevent.Timeout(limits.total_timeout)
        deadline.start()
        try:
            response = self._session.get(url, stream=True, allow_redirects=False,
                                         headers={"Accept": "application/json"},
                                         timeout=(min(limits.connect_timeout, limits.total_timeout),
                                                  limits.total_timeout))
            try:
                body = _read_capped(response, limits.max_bytes)
            finally:
                response.close()
        except gevent.Timeout as exc:
            if exc is not deadline:
                raise
            raise UpstreamError("MTR002", _timed_out(limits.total_timeout)) from None
        except requests.Timeout:
            raise UpstreamError("MTR002", _timed_out(limits.total_timeout)) from None
        except (requests.exceptions.InvalidURL, requests.exceptions.InvalidSchema,
                requests.exceptions.MissingSchema, UnicodeError) as exc:
            raise UpstreamError("MTR007", f"The request to Prometheus cannot be built: {exc}.") from None
        except requests.RequestException as exc:
            raise UpstreamError("MTR002", f"Prometheus is unreachable: {_reason(exc)}.") from None
        finally:
            deadline.close()
        if not 200 <= response.status_code < 300:
            message, error_type = _upstream_error(body)
            raise UpstreamError("MTR002", f"Prometheus answered {response.status_code}: {message}", error_type)
        return body

    def get_json(self, segments: Sequence[str], params: Params = ()) -> Any:
        body = self.get(segments, params)
        try:
            return json.loads(body)
        except ValueError:
            raise UpstreamError("MTR002", "Prometheus answered with a body that is not JSON.") from None

    def vector(self, promql: str) -> list[Sample]:
        """An instant query's samples (labels, value); a result of another type counts as none."""
        answer = self.get_json(("api", "v1", "query"), (("query", promql),))
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, dict) or data.get("resultType") != "vector":
            return []
        samples = []
        for series in data.get("result") or ():
            try:
                labels = {str(k): str(v) for k, v in series["metric"].items()}
                samples.append(Sample(labels, float(series["value"][1])))
            except (KeyError, IndexError, TypeError, ValueError, AttributeError):
                continue
        return samples

    def close(self) -> None:
        self._session.close()


def _session() -> requests.Session:
    session = requests.Session()
    session.trust_env = False         # no proxy or netrc from the environment: the URL is the configuration
    adapter = HTTPAdapter(pool_connections=1, pool_maxsize=POOL_SIZE, max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def _read_capped(response: requests.Response, max_bytes: int) -> bytes:
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise UpstreamError("MTR002", _too_large(max_bytes))
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_content(CHUNK):
        size += len(chunk)
        if size > max_bytes:
            raise UpstreamError("MTR002", _too_large(max_bytes))
        chunks.append(chunk)
    return b"".join(chunks)


def _upstream_error(body: bytes) -> tuple[str, str | None]:
    """Prometheus's own message (``{"status":"error","errorType":...,"error":...}``) or the body's start."""
    try:
        decoded = json.loads(body)
    except ValueError:
        decoded = None
    if isinstance(decoded, dict) and isinstance(decoded.get("error"), str):
        error_type = decoded.get("errorType")
        return decoded["error"][:_MESSAGE_CHARS], error_type if isinstance(error_type, str) else None
    text = body[:_MESSAGE_CHARS].decode("utf-8", "replace").strip()
    return text or "(empty body)", None


def _reason(exc: requests.RequestException) -> str:
    """The innermost cause (``Connection refused``), without urllib3's object reprs, host or port."""
    inner: Any = exc.args[0] if exc.args else exc
    cause: BaseException = getattr(inner, "reason", None) or exc
    while cause.__cause__ is not None:
        cause = cause.__cause__
    if isinstance(cause, OSError) and cause.strerror:
        return cause.strerror[:_MESSAGE_CHARS]
    text = re.sub(r"<[^>]*>: |\w*\(host=[^)]*\): ", "", str(cause))
    return text[:_MESSAGE_CHARS]


def _timed_out(seconds: float) -> str:
    return f"Prometheus did not answer within {seconds:g} s."


def _too_large(max_bytes: int) -> str:
    mib = 1024 * 1024
    size = f"{max_bytes // mib} MiB" if max_bytes % mib == 0 else f"{max_bytes} bytes"
    return f"The Prometheus answer is larger than {size}."
