"""Client-metadata documents: the URL rules, the address policy, and real fetches against a local HTTPS
server on 127.0.0.1 with its own CA (made here with openssl). The fetcher's address policy, resolver and
TLS context are constructor parameters: the tests loosen them there, nowhere else."""

from __future__ import annotations

import ipaddress
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gevent
import gevent.ssl
import pytest
from gevent.server import StreamServer

from app.oauth.addresses import IPAddress, public_only
from app.oauth.clients import UnknownClient
from app.oauth.metadata_documents import DocumentFetcher, client_id_url_problem
from tests.certs import TestCA

Reply = Callable[[Any], None]   # writes an answer on the TLS socket


@dataclass
class Server:
    """A local HTTPS (or, with ``tls=False``, plain TCP) server that records what reached it."""

    port: int = 0
    accepts: int = 0
    paths: list[str] = field(default_factory=list)
    routes: dict[str, Reply] = field(default_factory=dict)

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"https://{host}:{self.port}{path}"


def _serve(server: Server, ssl_context: Any | None) -> StreamServer:
    def handle(sock: Any, _address: Any) -> None:
        server.accepts += 1
        if ssl_context is None:
            return   # a bare listener: counting the connection is its whole job
        reader = sock.makefile("rb")
        try:
            request_line = reader.readline(4096).decode("latin-1")
            for _ in range(100):
                if reader.readline(4096) in (b"\r\n", b"\n", b""):
                    break
            path = request_line.split(" ")[1] if request_line.count(" ") >= 2 else "/"
            server.paths.append(path)
            reply = server.routes.get(path)
            if reply is None:
                sock.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            else:
                reply(sock)
        except OSError:
            pass   # the client hung up (what several tests expect it to do)

    tls = {} if ssl_context is None else {"ssl_context": ssl_context}
    listener = StreamServer(("127.0.0.1", 0), handle, **tls)
    listener.start()
    server.port = listener.server_port
    return listener


def document_reply(document: dict[str, Any] | bytes, status: str = "200 OK") -> Reply:
    body = document if isinstance(document, bytes) else json.dumps(document).encode()

    def reply(sock: Any) -> None:
        sock.sendall(f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
                     "Connection: close\r\n\r\n".encode() + body)
    return reply


def redirect_reply(location: str) -> Reply:
    def reply(sock: Any) -> None:
        sock.sendall(f"HTTP/1.1 302 Found\r\nLocation: {location}\r\nContent-Length: 0\r\n"
                     "Connection: close\r\n\r\n".encode())
    return reply


def doc(url: str, **members: Any) -> dict[str, Any]:
    return {"client_id": url, "client_name": "Test agent", "redirect_uris": ["http://127.0.0.1:33418/callback"],
            "token_endpoint_auth_method": "none", **members}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    """(server context, client context): a server certificate for localhost, 127.0.0.1 and
    doc.example.test, signed by a CA that only the client context trusts."""
    directory: Path = tmp_path_factory.mktemp("cimd-pki")
    ca = TestCA(directory / "ca", "CIMD test CA")
    pair = ca.issue("server", "/CN=localhost", san="DNS:localhost,IP:127.0.0.1,DNS:doc.example.test", server=True)
    server_context = gevent.ssl.SSLContext(gevent.ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(pair.cert, pair.key)
    client_context = gevent.ssl.create_default_context(cafile=ca.cert)
    return server_context, client_context


@pytest.fixture
def https(pki: tuple[Any, Any]) -> Iterator[Server]:
    server = Server()
    listener = _serve(server, pki[0])
    yield server
    listener.stop(timeout=1)


@pytest.fixture
def listener() -> Iterator[Server]:
    """A plain TCP listener on 127.0.0.1 that only counts the connections it accepts."""
    server = Server()
    running = _serve(server, None)
    yield server
    running.stop(timeout=1)


def allow_all(_address: IPAddress) -> str | None:
    return None


def fetcher(pki: tuple[Any, Any], **kwargs: Any) -> DocumentFetcher:
    return DocumentFetcher(address_policy=kwargs.pop("address_policy", allow_all), ssl_context=pki[1], **kwargs)


# ------------------------------------------------------------------------------------------------ URL rules
@pytest.mark.parametrize(("url", "fragment"), [
    ("http://example.com/client.json", "https URL"),
    ("https://example.com", "must have a path"),
    ("https://example.com/", "must have a path"),
    ("https://example.com/client.json#frag", "fragment"),
    ("https://user:pw@example.com/client.json", "user name or password"),
    ("https://example.com/a/../client.json", "'.' or '..'"),
    ("https://example.com/client json", "without spaces"),
    ("https://example.com:99999/client.json", "not a valid URL"),
    ("https://exämple.com/client.json", "must be ASCII"),
])
def test_client_id_url_rules(url: str, fragment: str) -> None:
    problem = client_id_url_problem(url)
    assert problem is not None and fragment in problem


def test_a_good_client_id_url_passes() -> None:
    assert client_id_url_problem("https://app.example.com/oauth/client.json?v=2") is None


@pytest.mark.parametrize("address", [
    "10.1.2.3", "172.16.0.1", "172.31.255.255", "192.168.1.1", "127.0.0.1", "127.8.9.10", "169.254.169.254",
    "100.64.0.1", "100.127.255.254", "0.0.0.0", "224.0.0.1", "255.255.255.255", "::", "::1", "fc00::1",
    "fd12:3456::1", "fe80::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:10.0.0.1", "::ffff:169.254.169.254",
    "64:ff9b::a00:1",
])
def test_the_policy_refuses_internal_addresses(address: str) -> None:
    assert public_only(ipaddress.ip_address(address)) is not None


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "172.32.0.1", "100.128.0.1", "2606:4700::1111",
                                     "::ffff:8.8.8.8"])
def test_the_policy_allows_public_addresses(address: str) -> None:
    assert public_only(ipaddress.ip_address(address)) is None


# ------------------------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_loopback_host_is_refused_before_any_connection(listener: Server, host: str) -> None:
    """The default policy: the host resolves to loopback, so nothing is connected to (the listener on that
    very address and port counts no connection)."""
    url = f"https://{host}:{listener.port}/client.json"
    with pytest.raises(UnknownClient, match="loopback") as refused:
        DocumentFetcher().client(url)
    gevent.sleep(0.2)   # a connection, had one been made, would be accepted by now
    assert listener.accepts == 0
    assert url in str(refused.value)


def test_a_host_with_any_internal_address_is_refused(listener: Server) -> None:
    """One public and one private address: refused (the connection could land on either)."""
    resolved = [ipaddress.ip_address("8.8.8.8"), ipaddress.ip_address("10.0.0.7")]
    fetch = DocumentFetcher(resolver=lambda host, port: list(resolved))
    with pytest.raises(UnknownClient, match=r"10\.0\.0\.7, a private address"):
        fetch.client("https://mixed.example.test/client.json")
    assert fetch.fetches == 1


# ------------------------------------------------------------------------------------------------ fetches
def test_a_good_document_gives_a_verified_client(https: Server, pki: tuple[Any, Any]) -> None:
    url = https.url("/client.json")
    https.routes["/client.json"] = document_reply(doc(url, grant_types=["authorization_code"]))
    client = fetcher(pki).client(url)
    assert client.client_id == url and client.verified
    assert client.client_name == "Test agent"
    assert client.redirect_uris == ("http://127.0.0.1:33418/callback",)
    assert client.grant_types == ("authorization_code",)
    assert client.token_endpoint_auth_method == "none"


def test_the_host_is_resolved_once_and_tls_checks_the_url_host(https: Server, pki: tuple[Any, Any]) -> None:
    """A name that no DNS knows, resolved by the injected resolver to 127.0.0.1: the connection goes to
    that address, and TLS checks the certificate against the URL's name (SNI)."""
    calls: list[str] = []

    def resolver(host: str, port: int) -> list[IPAddress]:
        calls.append(host)
        return [ipaddress.ip_address("127.0.0.1")]

    url = https.url("/client.json", host="doc.example.test")
    https.routes["/client.json"] = document_reply(doc(url))
    assert fetcher(pki, resolver=resolver).client(url).client_id == url
    assert calls == ["doc.example.test"]
    wrong = https.url("/client.json", host="other.example.test")   # same address, a name the cert lacks
    with pytest.raises(UnknownClient, match=r"TLS with other\.example\.test failed"):
        fetcher(pki, resolver=resolver).client(wrong)


def test_an_untrusted_certificate_is_refused(https: Server) -> None:
    url = https.url("/client.json")
    https.routes["/client.json"] = document_reply(doc(url))
    with pytest.raises(UnknownClient, match="TLS"):
        DocumentFetcher(address_policy=allow_all).client(url)   # the system's trust store: not the test CA


def test_answers_are_cached(https: Server, pki: tuple[Any, Any]) -> None:
    url = https.url("/client.json")
    https.routes["/client.json"] = document_reply(doc(url))
    fetch = fetcher(pki)
    assert fetch.client(url) == fetch.client(url)
    assert https.paths == ["/client.json"] and fetch.fetches == 1


def test_concurrent_lookups_share_one_fetch(https: Server, pki: tuple[Any, Any]) -> None:
    url = https.url("/client.json")
    plain = document_reply(doc(url))

    def slow(sock: Any) -> None:
        gevent.sleep(0.3)
        plain(sock)
    https.routes["/client.json"] = slow
    fetch = fetcher(pki)
    lookups = [gevent.spawn(fetch.client, url) for _ in range(5)]
    gevent.joinall(lookups, timeout=5, raise_error=True)
    assert {g.value.client_id for g in lookups} == {url}
    assert https.paths == ["/client.json"]


@pytest.mark.parametrize(("members", "fragment"), [
    ({"client_id": "https://elsewhere.example/client.json"}, "client_id is not its own URL"),
    ({"token_endpoint_auth_method": "client_secret_basic"}, "needs a shared secret"),
    ({"token_endpoint_auth_method": "client_secret_post"}, "needs a shared secret"),
    ({"token_endpoint_auth_method": "private_key_jwt"}, "not supported"),
    ({"client_secret": "s3cret"}, "client_secret"),
    ({"redirect_uris": []}, "redirect_uris"),
    ({"redirect_uris": ["http://evil.example/cb"]}, "loopback"),
    ({"grant_types": ["client_credentials"]}, "grant_types"),
])
def test_unusable_documents_are_refused(https: Server, pki: tuple[Any, Any], members: dict[str, Any],
                                        fragment: str) -> None:
    url = https.url("/client.json")
    document = doc(url, **members)
    if "redirect_uris" in members and members["redirect_uris"] == []:
        del document["redirect_uris"]
    https.routes["/client.json"] = document_reply(document)
    with pytest.raises(UnknownClient, match=fragment):
        fetcher(pki).client(url)


def test_a_missing_document_is_refused(https: Server, pki: tuple[Any, Any]) -> None:
    with pytest.raises(UnknownClient, match="answered HTTP 404"):
        fetcher(pki).client(https.url("/nothing.json"))


def test_a_large_declared_body_is_refused_without_reading_it(https: Server, pki: tuple[Any, Any]) -> None:
    """``Content-Length: 6144``: refused from the header; the server then stalls, so a client that read
    the body would wait for its timeout instead of answering at once."""
    def reply(sock: Any) -> None:
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 6144\r\n\r\n"
                     + b" " * 2048)
        gevent.sleep(4)
    url = https.url("/big.json")
    https.routes["/big.json"] = reply
    began = time.monotonic()
    with pytest.raises(UnknownClient, match="6144 bytes, more than the 5120 allowed"):
        fetcher(pki).client(url)
    assert time.monotonic() - began < 2


def test_a_large_undeclared_body_is_cut_at_the_cap(https: Server, pki: tuple[Any, Any]) -> None:
    """No length: 5 KB and one byte arrive, then the server stalls before the rest of its 6 KB; the fetch
    stops reading one byte past the cap and answers at once."""
    def reply(sock: Any) -> None:
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
                     + b" " * 5121)
        gevent.sleep(4)
        sock.sendall(b" " * 1023)
    url = https.url("/big.json")
    https.routes["/big.json"] = reply
    began = time.monotonic()
    with pytest.raises(UnknownClient, match="more than the 5120 bytes allowed"):
        fetcher(pki).client(url)
    assert time.monotonic() - began < 2


def test_a_slow_server_is_cut_at_five_seconds(https: Server, pki: tuple[Any, Any]) -> None:
    """Headers at once, then one byte every half second (each read is quick; the whole is not): the
    fetch ends at its 5 s total."""
    url = https.url("/slow.json")

    def reply(sock: Any) -> None:
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n")
        for _ in range(20):   # 10 s at most
            gevent.sleep(0.5)
            sock.sendall(b" ")
    https.routes["/slow.json"] = reply
    began = time.monotonic()
    with pytest.raises(UnknownClient, match="within 5 seconds"):
        fetcher(pki).client(url)
    assert 4.8 <= time.monotonic() - began < 6.0


# ------------------------------------------------------------------------------------------------ redirects
def test_three_redirects_are_followed(https: Server, pki: tuple[Any, Any]) -> None:
    url = https.url("/r3")
    https.routes.update({"/r3": redirect_reply("/r2"), "/r2": redirect_reply(https.url("/r1")),
                         "/r1": redirect_reply("/client.json"), "/client.json": document_reply(doc(url))})
    assert fetcher(pki).client(url).client_id == url
    assert https.paths == ["/r3", "/r2", "/r1", "/client.json"]


def test_a_fourth_redirect_is_refused(https: Server, pki: tuple[Any, Any]) -> None:
    url = https.url("/r4")
    https.routes.update({"/r4": redirect_reply("/r3"), "/r3": redirect_reply("/r2"), "/r2": redirect_reply("/r1"),
                         "/r1": redirect_reply("/client.json"), "/client.json": document_reply(doc(url))})
    with pytest.raises(UnknownClient, match="more than 3 redirects"):
        fetcher(pki).client(url)
    assert "/client.json" not in https.paths


def test_every_hop_is_checked_again(https: Server, listener: Server, pki: tuple[Any, Any]) -> None:
    """The policy allows the first hop's address and refuses the second's: the second server is never
    connected to."""
    checked: list[IPAddress] = []

    def policy(address: IPAddress) -> str | None:
        checked.append(address)
        return None if len(checked) == 1 else "refused by the test"

    url = https.url("/hop")
    https.routes["/hop"] = redirect_reply(f"https://127.0.0.1:{listener.port}/client.json")
    with pytest.raises(UnknownClient, match="refused by the test"):
        fetcher(pki, address_policy=policy).client(url)
    gevent.sleep(0.2)
    assert len(checked) == 2 and https.paths == ["/hop"] and listener.accepts == 0


def test_a_redirect_to_plain_http_is_refused(https: Server, listener: Server, pki: tuple[Any, Any]) -> None:
    url = https.url("/down")
    https.routes["/down"] = redirect_reply(f"http://127.0.0.1:{listener.port}/client.json")
    with pytest.raises(UnknownClient, match="redirects must stay on https"):
        fetcher(pki).client(url)
    assert listener.accepts == 0
