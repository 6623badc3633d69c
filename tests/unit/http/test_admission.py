"""The admission gate: one gated request at a time, first come first served, a poll between two, /-/ never
gated, a bounded queue answered with 503 API013, release on every path, and the opt-outs."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator

import gevent
import pytest
import requests
from flask import Blueprint, Flask, Response, request
from flask.testing import FlaskClient
from flask.views import MethodView
from gevent.event import Event
from werkzeug.test import TestResponse

from app import create_app
from app.cli import build_server
from app.config import ListenAddress, Settings
from app.http import admission
from app.http.admission import MAX_WAITING, AdmissionGate, Busy, gate_of
from app.resources import ResourceKind
from tests.conftest import free_port
from tests.unit.support import Harness


class Escape(BaseException):
    """Not an Exception: Flask's handlers let it out of the WSGI app (as GreenletExit would)."""


class Probe:
    """Test views' shared state: what ran, in which order, and whether the gate was held meanwhile."""

    def __init__(self, gate: AdmissionGate) -> None:
        self.gate = gate
        self.entered: list[str] = []
        self.busy_seen: list[bool] = []
        self.proceed = Event()
        self.running = 0
        self.most_at_once = 0

    def work(self, name: str) -> str:
        self.entered.append(name)
        self.busy_seen.append(self.gate.busy)
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            self.proceed.wait(5)    # yields: without the gate, other requests would run meanwhile
        finally:
            self.running -= 1
        return name


@pytest.fixture
def probe(harness: Harness) -> Probe:
    return Probe(gate_of(harness.app))


@pytest.fixture
def app(harness: Harness, probe: Probe) -> Flask:
    app = harness.app

    def work(name: str) -> str:
        return probe.work(name)

    def boom() -> str:
        raise RuntimeError("view failed")

    def escape() -> str:
        raise Escape

    @admission.exempt
    def io_bound() -> str:
        return probe.work("exempt")

    @admission.streaming
    def stream() -> Response:
        probe.busy_seen.append(probe.gate.busy)

        def body() -> Iterator[bytes]:
            probe.busy_seen.append(probe.gate.busy)
            yield b"data: 1\n\n"
        return Response(body(), mimetype="text/event-stream")

    def lazy(mimetype: str) -> Callable[[], Response]:
        def view() -> Response:
            def body() -> Iterator[bytes]:
                probe.busy_seen.append(probe.gate.busy)
                yield b"{}"
            return Response(body(), mimetype=mimetype)
        return view

    def waits_on_io() -> str:
        with admission.released():
            probe.busy_seen.append(probe.gate.busy)
            probe.proceed.wait(5)
        probe.busy_seen.append(probe.gate.busy)
        return "done"

    class Split(MethodView):
        @admission.exempt
        def get(self) -> str:
            return probe.work("method-exempt")

        def post(self) -> str:
            return probe.work("method-gated")

    open_bp = admission.exempt(Blueprint("open_bp", __name__))
    open_bp.add_url_rule("/t/bp", view_func=lambda: probe.work("blueprint-exempt"), endpoint="bp")

    app.add_url_rule("/t/work/<name>", view_func=work)
    app.add_url_rule("/t/boom", view_func=boom)
    app.add_url_rule("/t/escape", view_func=escape)
    app.add_url_rule("/t/exempt", view_func=io_bound)
    app.add_url_rule("/t/stream", view_func=stream)
    app.add_url_rule("/t/lazy-json", view_func=lazy("application/json"), endpoint="lazy_json")
    app.add_url_rule("/t/lazy-text", view_func=lazy("text/plain"), endpoint="lazy_text")
    app.add_url_rule("/t/io", view_func=waits_on_io)
    app.add_url_rule("/t/split", view_func=Split.as_view("split"))
    app.register_blueprint(open_bp)
    return app


@pytest.fixture
def gate(app: Flask) -> AdmissionGate:
    return gate_of(app)


def request_in_greenlet(app: Flask, path: str, method: str = "GET", **kwargs: object) -> gevent.Greenlet:
    return gevent.spawn(lambda: app.test_client().open(path, method=method, **kwargs))


def settle() -> None:
    """Let spawned greenlets run up to their first wait, and the gate's hand-off timers fire.

    Not a timed wait: everything here is in-process greenlets and zero-delay hub timers, so a few loop turns
    reach the quiet state whatever the machine's load (the tests then assert who is still waiting)."""
    for _ in range(5):
        gevent.sleep(0.001)   # one loop turn each


def answer(glet: gevent.Greenlet, timeout: float = 5) -> TestResponse:
    response = glet.get(timeout=timeout)
    assert isinstance(response, TestResponse)
    return response


# ---------------------------------------------------------------------------------------------- the gate
def test_requests_compute_one_at_a_time_in_arrival_order(app: Flask, probe: Probe, gate: AdmissionGate) -> None:
    names = [f"r{i}" for i in range(6)]
    glets = []
    for name in names:
        glets.append(request_in_greenlet(app, f"/t/work/{name}"))
        settle()
    assert probe.entered == ["r0"]                 # the others wait at the gate, not in the view
    assert gate.waiting == 5
    probe.proceed.set()
    assert [answer(g).get_data(as_text=True) for g in glets] == names
    assert probe.entered == names                  # first come, first served
    assert probe.most_at_once == 1
    assert all(probe.busy_seen)
    assert not gate.busy and gate.waiting == 0


def test_the_hub_polls_between_two_gated_requests() -> None:
    gate = AdmissionGate()
    loop = gevent.get_hub().loop
    first = gate.acquire()
    assert first.waited is None                    # an idle gate admits at once
    released_at = loop.iteration
    first.release()
    second = gate.acquire()                        # same loop iteration: waits for the next one
    assert loop.iteration > released_at
    assert second.waited is not None
    second.release()


def test_a_killed_waiter_leaves_the_queue_and_the_next_one_is_served() -> None:
    gate = AdmissionGate()
    holder = gate.acquire()
    order: list[str] = []

    def wait(name: str) -> None:
        ticket = gate.acquire()
        order.append(name)
        ticket.release()

    glets = {name: gevent.spawn(wait, name) for name in ("a", "b", "c")}
    settle()
    assert gate.waiting == 3
    glets["b"].kill()
    assert gate.waiting == 2
    assert gate.stats.abandoned == 1
    holder.release()
    gevent.joinall(list(glets.values()), timeout=5)
    assert order == ["a", "c"]
    assert not gate.busy and gate.waiting == 0


def test_a_waiter_past_its_deadline_is_refused_and_leaves_the_queue() -> None:
    gate = AdmissionGate(max_wait=0.05)
    holder = gate.acquire()
    with pytest.raises(Busy) as refused:
        gate.acquire()
    assert refused.value.reason == "timeout"
    assert gate.waiting == 0 and gate.stats.rejected_timeout == 1
    holder.release()
    gate.acquire().release()                       # the gate still works


# ---------------------------------------------------------------------------------------------- the app
def test_meta_endpoints_answer_while_the_gate_is_held(app: Flask, gate: AdmissionGate) -> None:
    holder = gate.acquire()
    try:
        client = app.test_client()
        with gevent.Timeout(2):
            assert client.get("/-/health").status_code == 200
            assert client.get("/-/ready").status_code == 200
            assert client.get("/-/metrics").status_code == 200
        gated = request_in_greenlet(app, "/nodes")
        settle()
        assert not gated.ready() and gate.waiting == 1   # a resource read waits
    finally:
        holder.release()
    assert answer(gated).status_code == 200


def test_a_full_queue_is_answered_503_api013_with_retry_after(app: Flask, gate: AdmissionGate) -> None:
    holder = gate.acquire()
    waiters = [gevent.spawn(lambda: gate.acquire().release()) for _ in range(MAX_WAITING)]
    settle()
    assert gate.waiting == MAX_WAITING
    try:
        with gevent.Timeout(2):
            response = app.test_client().get("/nodes")
    finally:
        holder.release()
    assert response.status_code == 503
    assert response.mimetype == "application/problem+json"
    assert response.headers["Retry-After"] == "1"
    body = response.get_json()
    assert body["code"] == "API013" and body["type"] == "/api/errors/API013"
    assert gevent.joinall(waiters, timeout=10) and all(w.successful() for w in waiters)
    assert gate.stats.rejected_full == 1
    assert app.test_client().get("/nodes").status_code == 200


@pytest.mark.parametrize("escapes", [False, True])
def test_the_gate_is_released_when_the_view_raises(app: Flask, gate: AdmissionGate, escapes: bool) -> None:
    client = app.test_client()
    if escapes:
        with pytest.raises(Escape):
            client.get("/t/escape")
    else:
        assert client.get("/t/boom").status_code == 500
    assert not gate.busy
    assert gate.stats.admitted == 1
    with gevent.Timeout(2):
        assert client.get("/nodes").status_code == 200


def test_the_gate_is_released_when_the_request_greenlet_is_killed(app: Flask, probe: Probe,
                                                                   gate: AdmissionGate) -> None:
    computing = request_in_greenlet(app, "/t/work/a")
    settle()
    assert gate.busy and probe.entered == ["a"]
    computing.kill()                               # e.g. gunicorn's graceful timeout, or the client went away
    assert not gate.busy
    probe.proceed.set()
    with gevent.Timeout(2):
        assert app.test_client().get("/t/work/b").status_code == 200


def test_head_and_304_release_the_gate(app: Flask, gate: AdmissionGate) -> None:
    client = app.test_client()
    first = client.get("/nodes")
    assert client.head("/nodes").status_code == 200
    assert client.get("/nodes", headers={"If-None-Match": first.headers["ETag"]}).status_code == 304
    assert client.get("/nodes/no-such-node").status_code == 404
    assert gate.stats.admitted == 4
    assert not gate.busy and gate.waiting == 0


def test_a_waiter_whose_client_closed_the_connection_is_not_served(app: Flask, probe: Probe,
                                                                   gate: AdmissionGate) -> None:
    gone_ours, gone_peer = socket.socketpair()
    alive_ours, alive_peer = socket.socketpair()
    try:
        computing = request_in_greenlet(app, "/t/work/first")
        settle()
        gone = request_in_greenlet(app, "/t/work/gone", environ_base={"gunicorn.socket": gone_ours})
        alive = request_in_greenlet(app, "/t/work/alive", environ_base={"gunicorn.socket": alive_ours})
        settle()
        gone_peer.close()
        probe.proceed.set()
        assert answer(computing).status_code == 200
        refused = answer(gone)
        assert refused.status_code == 503 and refused.get_json()["code"] == "API013"
        assert answer(alive).status_code == 200
        assert probe.entered == ["first", "alive"]
        assert gate.stats.client_gone == 1
    finally:
        for sock in (gone_ours, alive_ours, alive_peer):
            sock.close()


def test_client_gone_sees_eof_but_not_a_live_or_pipelining_client() -> None:
    ours, peer = socket.socketpair()
    try:
        environ = {"gunicorn.socket": ours}
        assert not admission.client_gone(environ)
        peer.sendall(b"GET /next HTTP/1.1\r\n")          # a pipelined request is no disconnect
        assert not admission.client_gone(environ)
        assert ours.recv(100).startswith(b"GET")        # peeked, not consumed
        peer.close()
        assert admission.client_gone(environ)
        assert not admission.client_gone({})            # no socket known: assume alive
    finally:
        ours.close()


# ---------------------------------------------------------------------------------------------- opt-outs
@pytest.mark.parametrize(("path", "method", "name"), [("/t/exempt", "GET", "exempt"),
                                                      ("/t/split", "GET", "method-exempt"),
                                                      ("/t/split", "HEAD", "method-exempt"),
                                                      ("/t/bp", "GET", "blueprint-exempt")])
def test_exempt_views_run_while_the_gate_is_held(app: Flask, probe: Probe, gate: AdmissionGate,
                                                 path: str, method: str, name: str) -> None:
    holder = gate.acquire()
    try:
        probe.proceed.set()
        with gevent.Timeout(2):
            response = app.test_client().open(path, method=method)
        assert response.status_code == 200
        assert probe.entered == [name]
    finally:
        holder.release()


def test_a_method_without_the_opt_out_is_gated(app: Flask, probe: Probe, gate: AdmissionGate) -> None:
    holder = gate.acquire()
    post = request_in_greenlet(app, "/t/split", method="POST")
    settle()
    assert probe.entered == [] and gate.waiting == 1
    holder.release()
    probe.proceed.set()
    assert answer(post).get_data(as_text=True) == "method-gated"


def test_a_streamed_body_runs_after_the_gate_is_released(app: Flask, probe: Probe) -> None:
    response = app.test_client().get("/t/stream", buffered=True)
    assert response.get_data() == b"data: 1\n\n"
    assert probe.busy_seen == [True, False]        # the view holds the gate, the body does not


def test_a_lazy_json_body_is_serialised_inside_the_gate_and_other_lazy_bodies_outside(
        app: Flask, probe: Probe) -> None:
    client = app.test_client()
    assert client.get("/t/lazy-json", buffered=True).get_data() == b"{}"
    assert client.get("/t/lazy-text", buffered=True).get_data() == b"{}"
    assert probe.busy_seen == [True, False]


def test_released_lets_others_compute_during_an_io_wait(app: Flask, probe: Probe, gate: AdmissionGate) -> None:
    waiting_on_io = request_in_greenlet(app, "/t/io")
    settle()
    assert probe.busy_seen == [False]              # gave the gate up around its I/O wait
    with gevent.Timeout(2):
        assert app.test_client().get("/nodes").status_code == 200
    probe.proceed.set()
    assert answer(waiting_on_io).get_data(as_text=True) == "done"
    assert probe.busy_seen == [False, True]        # and held it again afterwards
    assert not gate.busy


# ---------------------------------------------------------------------------------------------- metrics
def test_gate_figures_are_in_self_metrics(app: Flask, gate: AdmissionGate) -> None:
    client: FlaskClient = app.test_client()
    client.get("/nodes")
    holder = gate.acquire()
    waiter = gevent.spawn(lambda: gate.acquire().release())
    settle()
    text = client.get("/-/metrics").get_data(as_text=True)
    holder.release()
    waiter.join(timeout=5)
    assert "shoal_admission_waiting 1.0" in text
    assert "shoal_admission_busy 1.0" in text
    assert 'shoal_admission_rejected_total{reason="full"} 0.0' in text
    assert 'shoal_admission_wait_seconds_bucket{le="+Inf"} 2.0' in text


# ---------------------------------------------------------------------------------------------- servers
def test_the_shoal_server_gates_requests_and_hands_the_gate_the_client_socket() -> None:
    port = free_port()
    settings = Settings(listen_addr=ListenAddress("127.0.0.1", port), docker_host="unix:///nonexistent.sock")
    app = create_app(settings, configure_logging=False)
    gate = gate_of(app)

    def seen() -> str:
        return f"{gate.busy} {isinstance(request.environ.get('shoal.socket'), socket.socket)}"

    app.add_url_rule("/t/seen", view_func=seen)
    server = build_server(app, settings)
    server.start()
    try:
        response = requests.get(f"http://127.0.0.1:{port}/t/seen", timeout=5)
    finally:
        server.stop(timeout=2)
    assert response.text == "True True"
    assert gate.stats.admitted == 1 and not gate.busy


# ---------------------------------------------------------------------------------------------- lanes
def test_the_light_lane_takes_turns_with_the_heavy_one() -> None:
    gate = AdmissionGate()
    holder = gate.acquire()
    order: list[str] = []

    def wait(name: str, light: bool) -> None:
        ticket = gate.acquire(light=light)
        order.append(name)
        ticket.release()

    glets = [gevent.spawn(wait, f"h{i}", False) for i in range(4)]
    settle()
    glets += [gevent.spawn(wait, f"l{i}", True) for i in range(2)]   # arrive after every heavy waiter
    settle()
    assert gate.waiting == 6
    holder.release()
    gevent.joinall(glets, timeout=5)
    assert order == ["l0", "h0", "l1", "h1", "h2", "h3"]
    assert not gate.busy and gate.waiting == 0


def test_both_lanes_count_against_the_queue_bound() -> None:
    gate = AdmissionGate(max_waiting=2)
    holder = gate.acquire()
    glets = [gevent.spawn(gate.acquire, light=light) for light in (False, True)]
    settle()
    with pytest.raises(Busy):
        gate.acquire(light=True)
    gevent.killall(glets)
    holder.release()


def test_resource_details_wait_in_the_light_lane(app: Flask, probe: Probe, gate: AdmissionGate,
                                                 harness: Harness) -> None:
    """A detail asked after several slow gated requests is served right after the current one."""
    glets = [request_in_greenlet(app, f"/t/work/w{i}") for i in range(3)]
    settle()
    task_id = harness.cache.entries(ResourceKind.TASK)[0].id
    detail = request_in_greenlet(app, f"/tasks/{task_id}")
    settle()
    assert probe.entered == ["w0"] and gate.waiting == 3
    probe.proceed.set()
    assert answer(detail).status_code == 200
    assert probe.entered[:1] == ["w0"] and len(probe.entered) <= 2   # served after at most one more request
    for glet in glets:
        answer(glet)
