"""Condition waits of the MCP live tests: the server's own figures, never a fixed sleep."""

from __future__ import annotations

import asyncio
import re
import time

import httpx

_STREAMS = re.compile(r"^shoal_mcp_session_streams (\S+)$", re.MULTILINE)


async def get_streams_open(base: str, at_least: int = 1, timeout: float = 15.0) -> None:
    """Wait until ``at_least`` sessions have their GET stream open (``/-/metrics``): the SDK opens it after
    ``notifications/initialized``, so a notification sent before might find no stream to ride."""
    deadline = time.monotonic() + timeout
    async with httpx.AsyncClient(base_url=base, timeout=5) as http:
        while time.monotonic() < deadline:
            found = _STREAMS.search((await http.get("/-/metrics")).text)
            if found and float(found.group(1)) >= at_least:
                return
            await asyncio.sleep(0.02)   # poll interval of a bounded wait
    raise AssertionError(f"no {at_least} open MCP GET stream(s) within {timeout} s")


def wait_cached(base: str, path: str, timeout: float = 15.0) -> None:
    """Wait until the server's cache holds the object at ``path`` (e.g. a service the test just created with
    the docker SDK: the watcher sees it a few ms later)."""
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=base, timeout=5) as http:
        while time.monotonic() < deadline:
            if http.get(path, headers={"Accept": "application/json"}).status_code == 200:
                return
            time.sleep(0.02)   # poll interval of a bounded wait
    raise AssertionError(f"{path} not in the cache within {timeout} s")
