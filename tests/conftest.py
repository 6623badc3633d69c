"""Shared fixtures. Integration tests get the real lab swarm from a session fixture; a missing engine is
a failure with the reason, never a skip.

Run pytest under ``python -m gevent.monkey --module pytest`` (scripts/test does), so the watcher's
greenlets and the docker SDK's sockets cooperate inside the test process.

Every response the integration tests get from Shoal (``requests`` to the gunicorn ``server`` fixture, the
Flask test client of apps made by ``start_runtime_app``) is checked against the OpenAPI document served at
``/api``: the status is documented for the operation (or ``default``), the Content-Type is one it
lists, and a JSON body validates against its schema. A mismatch fails the test at teardown.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import docker
import pytest
from flask.testing import FlaskClient

from app import create_app
from app.config import Settings
from app.runtime import Runtime, runtime_of

REPO = Path(__file__).resolve().parent.parent
LAB = REPO / "scripts" / "lab-swarm"


def wait_for(condition: Callable[[], object], timeout: float, interval: float = 0.05,
             message: str = "condition") -> object:
    """Poll ``condition`` until it returns something truthy, or fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        try:
            result = condition()
            if result:
                return result
        except Exception as exc:  # the condition may race with the engine; retry until the deadline
            last_error = exc
        time.sleep(interval)     # the poll interval of this bounded wait
    raise AssertionError(f"timed out after {timeout}s waiting for {message}"
                         + (f" (last error: {last_error})" if last_error else ""))


def wait_steady(value: Callable[[], object], quiet: float, timeout: float, interval: float = 0.05,
                message: str = "a steady value") -> Any:
    """Poll ``value`` until it is truthy and has not changed for ``quiet`` seconds; return it, or fail after
    ``timeout``. For "let the trailing changes land": a condition on stillness instead of a fixed sleep."""
    state: dict[str, Any] = {"value": None, "since": 0.0}

    def still() -> object:
        current, now = value(), time.monotonic()
        if not current or current != state["value"]:
            state.update(value=current, since=now)
            return None
        return current if now - state["since"] >= quiet else None

    return wait_for(still, timeout, interval, message)


def lab(*args: str, timeout: float = 600) -> str:
    """Run the lab script; return the DOCKER_HOST it prints, failing the test run with its output."""
    proc = subprocess.run([str(LAB), *args], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        pytest.fail(f"scripts/lab-swarm {' '.join(args)} failed ({proc.returncode}):\n"
                    f"{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}", pytrace=False)
    hosts = [line.split("=", 1)[1] for line in proc.stdout.splitlines() if line.startswith("DOCKER_HOST=")]
    return hosts[-1] if hosts else ""


def check_engine(host: str) -> docker.APIClient:
    client = docker.APIClient(base_url=host, version="1.41", timeout=30)
    try:
        state = client.info()["Swarm"]["LocalNodeState"]
    except Exception as exc:
        pytest.fail(f"the lab engine at {host} does not answer: {exc}", pytrace=False)
    if state != "active":
        pytest.fail(f"the engine at {host} is not a swarm manager (state {state!r})", pytrace=False)
    return client


@pytest.fixture(scope="session")
def docker_host() -> str:
    """The lab swarm's DOCKER_HOST: from scripts/test, or started here (idempotent)."""
    host = os.environ.get("SHOAL_TEST_DOCKER_HOST") or lab("up")
    if not host:
        pytest.fail("scripts/lab-swarm up printed no DOCKER_HOST line", pytrace=False)
    check_engine(host)
    return host


@pytest.fixture(scope="session")
def engine(docker_host: str) -> docker.APIClient:
    return check_engine(docker_host)


# --------------------------------------------------------------------------- responses vs the OpenAPI document
class OpenApiCheck:
    """Checks responses against the document (jsonschema over ``components``, validators cached)."""

    EXTENSIONS = (".feed.json", ".json", ".html", ".atom", ".jgf", ".graphml", ".dot")   # the last three: /topology

    def __init__(self) -> None:
        self.failures: list[str] = []
        self.bases: set[str] = set()
        self._document: dict[str, Any] | None = None
        self._paths: list[tuple[re.Pattern[str], str]] = []
        self._validators: dict[str, Any] = {}

    @property
    def document(self) -> dict[str, Any]:
        if self._document is None:
            response = create_app(Settings(), configure_logging=False).test_client().get("/api")
            self._document = response.get_json()
            self._paths = [(re.compile("^" + re.sub(r"\\{[^}]+\\}", "[^/]+", re.escape(path)) + "$"), path)
                           for path in self._document["paths"]]
            self._paths.sort(key=lambda item: "{" in item[1])   # literal paths before templates
        return self._document

    def _template(self, path: str) -> str | None:
        self.document  # noqa: B018 (loads the paths)
        candidates = [path] + [path[: -len(ext)] for ext in self.EXTENSIONS if path.endswith(ext)]
        for candidate in candidates:
            for pattern, template in self._paths:
                if pattern.match(candidate):
                    return template
        return None

    def _validator(self, schema: dict[str, Any]) -> Any:
        from jsonschema import Draft202012Validator

        key = json.dumps(schema, sort_keys=True)
        if key not in self._validators:
            self._validators[key] = Draft202012Validator({**schema, "components": self.document["components"]})
        return self._validators[key]

    def check(self, method: str, path: str, status: int, content_type: str, body: bytes | None) -> None:
        where = f"{method} {path} → {status} {content_type}"
        template = self._template(path)
        # HEAD is GET without the body (RFC 9110 §9.3.2): the document describes GET only.
        verb = "get" if method == "HEAD" else method.lower()
        operation = self.document["paths"][template].get(verb) if template else None
        if operation is None:
            # Unknown paths and methods: a problem (or the dashboard shell for browsers).
            responses = {"default": {"content": {"application/problem+json": {"schema": {
                "$ref": "#/components/schemas/ProblemV1"}}, "text/html": {}}}}
        else:
            responses = operation.get("responses", {})
        response = responses.get(str(status)) or (responses.get("default") if status >= 400 else None)
        if response is None:
            self.failures.append(f"{where}: status not documented ({sorted(responses)})")
            return
        content = response.get("content")
        if status == 304 or method == "HEAD" or not content:
            return
        if status == 201 and not body and not content_type:   # a create with Prefer: return=minimal
            return
        mimetype = content_type.split(";", 1)[0].strip().lower()
        if mimetype not in content:
            self.failures.append(f"{where}: Content-Type not documented ({sorted(content)})")
            return
        schema = content[mimetype].get("schema")
        if schema is None or body is None or not (mimetype.endswith("json")):
            return
        try:
            instance = json.loads(body)
        except ValueError as exc:
            self.failures.append(f"{where}: body is not JSON ({exc})")
            return
        errors = sorted(self._validator(schema).iter_errors(instance), key=lambda e: list(e.absolute_path))
        if errors:
            error = errors[0]
            self.failures.append(f"{where}: {error.message[:300]} at {list(error.absolute_path)} "
                                 f"({len(errors)} errors)")


OPENAPI = OpenApiCheck()


class CheckedFlaskClient(FlaskClient):
    """The Flask test client of live apps, each response checked against the document."""

    def open(self, *args: Any, **kwargs: Any) -> Any:
        response = super().open(*args, **kwargs)
        request = response.request
        body = None if response.is_streamed else response.get_data()
        OPENAPI.check(request.method, request.path, response.status_code, response.content_type or "", body)
        return response


@pytest.fixture(scope="session", autouse=True)
def _checked_requests() -> Iterator[None]:
    """``requests`` to a registered Shoal server are checked (other traffic, e.g. the docker SDK, is not)."""
    import requests

    original = requests.Session.send

    def send(session: requests.Session, prepared: requests.PreparedRequest, **kwargs: Any) -> requests.Response:
        response = original(session, prepared, **kwargs)
        url = prepared.url or ""
        base = next((b for b in OPENAPI.bases if url.startswith(b + "/")), None)
        if base is not None:
            path = urlsplit(url).path
            body = None if kwargs.get("stream") else response.content
            OPENAPI.check(prepared.method or "GET", path, response.status_code,
                          response.headers.get("Content-Type", ""), body)
        return response

    requests.Session.send = send  # type: ignore[method-assign]
    yield
    requests.Session.send = original  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _openapi_conformance() -> Iterator[None]:
    OPENAPI.failures.clear()
    yield
    failures, OPENAPI.failures[:] = list(OPENAPI.failures), []
    assert not failures, "responses that disagree with /api:\n" + "\n".join(failures[:20])


def start_runtime_app(host: str, **overrides: object):  # type: ignore[no-untyped-def]
    overrides = {"data_dir": ":memory:", **overrides}   # no state store unless a test asks for one
    settings = Settings(docker_host=host, task_poll_interval=0.5, **overrides)  # type: ignore[arg-type]
    app = create_app(settings, configure_logging=False)
    app.test_client_class = CheckedFlaskClient
    runtime = runtime_of(app)
    runtime.start()
    wait_for(lambda: runtime.cache.freshness.synced, 30, message="first full sync")
    return app, runtime


@pytest.fixture(scope="session")
def live_app(docker_host: str) -> Iterator[tuple[object, Runtime]]:
    """An in-process app whose watcher follows the lab swarm (Flask test client + real engine)."""
    app, runtime = start_runtime_app(docker_host)
    yield app, runtime
    runtime.stop()


@pytest.fixture
def live_client(live_app: tuple[Any, Runtime]) -> FlaskClient:
    client: FlaskClient = live_app[0].test_client()
    return client


def running_app(host: str, **overrides: object) -> Iterator[Any]:
    """For module fixtures: ``yield from running_app(host, operations_level=3)`` gives a synced app and
    stops its runtime afterwards."""
    app, runtime = start_runtime_app(host, **overrides)
    try:
        yield app
    finally:
        runtime.stop()


@pytest.fixture(scope="session")
def dclient(docker_host: str) -> docker.DockerClient:
    """The docker SDK's high-level client on the lab (creating test objects)."""
    return docker.DockerClient(base_url=docker_host, version="1.41", timeout=30)


def docker_lines(docker_host: str, *args: str) -> list[str]:
    """The non-blank output lines of a docker CLI command against ``docker_host``."""
    proc = subprocess.run(["docker", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "DOCKER_HOST": docker_host}, check=True)
    return [line for line in proc.stdout.splitlines() if line.strip()]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def gunicorn_env(docker_host: str, port: int, **extra: str) -> dict[str, str]:
    """The environment of a test gunicorn on 127.0.0.1:``port`` following the lab swarm (no config file)."""
    env = {**os.environ, "SERVICE_DOCKER_HOST": docker_host, "SERVICE_LISTEN_ADDR": f"127.0.0.1:{port}",
           "SERVICE_LOG_LEVEL": "info", "SERVICE_WATCHER_TASK_POLL_INTERVAL": "0.5", **extra}
    env.pop("SERVICE_CONFIG", None)
    return env


def launch_gunicorn(env: dict[str, str], log_path: Path, base: str) -> subprocess.Popen[bytes]:
    """Start gunicorn (the gevent worker, ``gunicorn.conf.py``) and wait until ``base`` is ready (first full
    sync); on failure kill it and fail the test with the end of its log. Every response is checked against
    ``/api`` (``OPENAPI``)."""
    import requests

    OPENAPI.bases.add(base)
    with log_path.open("w") as log:
        proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "gunicorn"), "-c", "gunicorn.conf.py", "wsgi:app"],
                                cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: requests.get(f"{base}/-/ready", timeout=2).status_code == 200, 120,
                 interval=0.2, message="gunicorn readiness")
    except AssertionError:
        proc.kill()
        pytest.fail(f"gunicorn did not become ready:\n{log_path.read_text()[-4000:]}", pytrace=False)
    return proc


@pytest.fixture(scope="session")
def server(docker_host: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The real thing: gunicorn with the gevent worker on 127.0.0.1, following the lab swarm."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("gunicorn") / "server.log"
    base = f"http://127.0.0.1:{port}"
    proc = launch_gunicorn(gunicorn_env(docker_host, port,   # a fresh state store per session
                                        SERVICE_DATA_DIR=str(tmp_path_factory.mktemp("state"))), log_path, base)
    yield base
    stop_gunicorn(proc, log_path)


def stop_gunicorn(proc: subprocess.Popen[bytes], log_path: Path, check_code: bool = True) -> None:
    """SIGTERM, then: stopped within 20 s, exit status 0 (unless ``check_code`` is False), no traceback in
    its log."""
    proc.terminate()
    try:
        code = proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("gunicorn did not stop within 20 s of SIGTERM", pytrace=False)
    assert not check_code or code == 0, f"gunicorn exited with {code}:\n{log_path.read_text()[-4000:]}"
    assert "Traceback" not in log_path.read_text(), log_path.read_text()[-4000:]
