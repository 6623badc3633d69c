"""Stopping a server a benchmark started: SIGTERM (gunicorn's graceful stop), SIGKILL after ``timeout``."""

from __future__ import annotations

import subprocess


def stop(proc: subprocess.Popen[bytes], timeout: float = 20) -> None:
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
