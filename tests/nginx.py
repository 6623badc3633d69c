"""A real nginx (Debian ``nginx``, installed by scripts/setup) as the trusted reverse proxy of auth mode
``headers``.

Started in the foreground (``daemon off``, ``master_process off``: one process, the test's user, no
switch to ``www-data``) on 127.0.0.1 at a free port, with its configuration, htpasswd, pid, logs and temp
directories under a temporary prefix: the system nginx is never touched. It authenticates users with
``auth_basic`` (an htpasswd of ``openssl passwd -apr1`` hashes), drops the client's ``Authorization``
header, and forwards ``X-Forwarded-User: $remote_user``, per-user headers (groups, email, grants) from
``map`` blocks, the shared secret header and ``X-Forwarded-For``, connecting from 127.0.0.1
(``proxy_bind``). Every wait is bounded; a missing binary or a proxy that never listens fails loudly (no
skips).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import free_port, wait_for

START_TIMEOUT = 15.0


@dataclass(frozen=True, slots=True)
class NginxProxy:
    url: str
    prefix: Path
    process: subprocess.Popen[bytes]

    @property
    def error_log(self) -> Path:
        return self.prefix / "error.log"

    @property
    def access_log(self) -> Path:
        return self.prefix / "access.log"

    def logs(self) -> str:
        return "".join(p.read_text(errors="replace") for p in (self.error_log, self.access_log) if p.exists())


def _binary() -> str:
    path = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").exists() else None)
    if path is None:
        pytest.fail("nginx not found: run scripts/setup (it installs the Debian package)", pytrace=False)
    return path


def apr1(password: str) -> str:
    """An Apache MD5 (``$apr1$``) hash, one of the formats nginx's auth_basic_user_file reads."""
    done = subprocess.run(["openssl", "passwd", "-apr1", "-stdin"], input=password, capture_output=True,
                          text=True, timeout=10, check=True)
    return done.stdout.strip()


def _quoted(value: str) -> str:
    """An nginx string literal: single quotes when the value holds double quotes (JSON), else double."""
    quote = "'" if '"' in value else '"'
    if any(c in value for c in (quote, "\\", "\n", "$")):
        raise ValueError(f"not safe in an nginx string: {value!r}")
    return f"{quote}{value}{quote}"


def _map(variable: str, values: Mapping[str, str]) -> str:
    rows = "".join(f"    {_quoted(user)} {_quoted(value)};\n" for user, value in values.items())
    return f"  map $remote_user ${variable} {{\n    default \"\";\n{rows}  }}\n"


def config(prefix: Path, port: int, upstream: str, *, user_header: str,
           per_user: Mapping[str, Mapping[str, str]], secret: tuple[str, str] | None) -> str:
    """nginx.conf: ``user_header`` gets ``$remote_user``; each ``per_user`` header gets its value for the
    authenticated user from a ``map`` (empty, hence not sent, for other users)."""
    temp = "".join(f"  {name}_temp_path {prefix / name};\n" for name in ("client_body", "proxy", "fastcgi",
                                                                          "uwsgi", "scgi"))
    variables = {header: f"shoal_{index}" for index, header in enumerate(per_user)}
    maps = "".join(_map(variables[header], values) for header, values in per_user.items())
    forwarded = "".join(f"      proxy_set_header {header} ${variable};\n" for header, variable in variables.items())
    secret_line = f"      proxy_set_header {secret[0]} {_quoted(secret[1])};\n" if secret else ""
    return (
        "daemon off;\nmaster_process off;\nworker_processes 1;\n"
        f"pid {prefix / 'nginx.pid'};\nerror_log {prefix / 'error.log'} info;\n"
        "events { worker_connections 64; }\n"
        "http {\n"
        f"  access_log {prefix / 'access.log'};\n{temp}{maps}"
        "  server {\n"
        f"    listen 127.0.0.1:{port};\n"
        "    location / {\n"
        "      auth_basic \"shoal\";\n"
        f"      auth_basic_user_file {prefix / 'htpasswd'};\n"
        f"      proxy_pass {upstream};\n"
        "      proxy_bind 127.0.0.1;\n"
        "      proxy_http_version 1.1;\n"
        "      proxy_buffering off;\n"                          # event streams pass as they come
        "      proxy_set_header Host $http_host;\n"
        "      proxy_set_header Authorization \"\";\n"          # the password stops here
        f"      proxy_set_header {user_header} $remote_user;\n"
        f"{forwarded}{secret_line}"
        "      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n"
        "    }\n"
        "  }\n"
        "}\n")


def plain_config(prefix: Path, port: int, upstream: str) -> str:
    """nginx.conf of a plain reverse proxy (no authentication): what an operator puts in front of Shoal
    with the dashboard; a stopped upstream answers 502 as nginx does by default."""
    temp = "".join(f"  {name}_temp_path {prefix / name};\n" for name in ("client_body", "proxy", "fastcgi",
                                                                          "uwsgi", "scgi"))
    return (
        "daemon off;\nmaster_process off;\nworker_processes 1;\n"
        f"pid {prefix / 'nginx.pid'};\nerror_log {prefix / 'error.log'} info;\n"
        "events { worker_connections 64; }\n"
        "http {\n"
        f"  access_log {prefix / 'access.log'};\n{temp}"
        "  server {\n"
        f"    listen 127.0.0.1:{port};\n"
        "    location / {\n"
        f"      proxy_pass {upstream};\n"
        "      proxy_http_version 1.1;\n"
        "      proxy_buffering off;\n"
        "      proxy_set_header Host $http_host;\n"
        "      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;\n"
        "    }\n"
        "  }\n"
        "}\n")


def start_nginx(prefix: Path, upstream: str, users: Mapping[str, str], *, user_header: str,
                per_user: Mapping[str, Mapping[str, str]] | None = None,
                secret: tuple[str, str] | None = None) -> NginxProxy:
    """nginx on 127.0.0.1:<free port> in front of ``upstream`` (``http://127.0.0.1:<port>``); ``users``
    maps user names to passwords. Checked with ``nginx -t`` first, then waited for until it listens."""
    prefix.mkdir(parents=True, exist_ok=True)
    (prefix / "htpasswd").write_text("".join(f"{user}:{apr1(password)}\n" for user, password in users.items()))
    port = free_port()
    return _start(prefix, port, config(prefix, port, upstream, user_header=user_header, per_user=per_user or {},
                                       secret=secret))


def start_plain_proxy(prefix: Path, upstream: str) -> NginxProxy:
    """A plain nginx reverse proxy in front of ``upstream`` (no authentication)."""
    prefix.mkdir(parents=True, exist_ok=True)
    port = free_port()
    return _start(prefix, port, plain_config(prefix, port, upstream))


def _start(prefix: Path, port: int, text: str) -> NginxProxy:
    binary = _binary()
    conf = prefix / "nginx.conf"
    conf.write_text(text)
    command = [binary, "-p", str(prefix), "-c", str(conf), "-e", str(prefix / "error.log")]
    checked = subprocess.run([*command, "-t"], capture_output=True, text=True, timeout=20)
    if checked.returncode != 0:
        pytest.fail(f"nginx -t refused the test configuration:\n{checked.stderr}\n{conf.read_text()}", pytrace=False)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proxy = NginxProxy(f"http://127.0.0.1:{port}", prefix, process)

    def listening() -> bool:
        if process.poll() is not None:
            raise AssertionError(f"nginx exited with {process.returncode}:\n{proxy.logs()[-3000:]}")
        with socket.socket() as sock:
            sock.settimeout(0.5)
            return sock.connect_ex(("127.0.0.1", port)) == 0

    try:
        wait_for(listening, START_TIMEOUT, interval=0.1, message="nginx listening")
    except AssertionError as failure:
        stop_nginx(proxy)
        pytest.fail(f"nginx did not start: {failure}", pytrace=False)
    return proxy


def stop_nginx(proxy: NginxProxy) -> None:
    """SIGQUIT (graceful), SIGKILL after 10 s."""
    if proxy.process.poll() is not None:
        return
    proxy.process.send_signal(3)
    try:
        proxy.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proxy.process.kill()
        proxy.process.wait(timeout=10)
