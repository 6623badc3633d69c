"""The Flask class of the app: Flask with its per-call coroutine check made once per function."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Flask


class ShoalFlask(Flask):
    """Flask asks ``inspect.iscoroutinefunction`` of every hook and view on every call (``ensure_sync``:
    38 calls per request here, 8 % of a small read). The functions are the registered ones, so the
    answer is kept per function; an ``async def`` still gets Flask's own handling."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ensured: dict[Callable[..., Any], Callable[..., Any]] = {}

    def ensure_sync(self, func: Callable[..., Any]) -> Callable[..., Any]:
        ensured = self._ensured.get(func)
        if ensured is None:
            ensured = super().ensure_sync(func)
            if len(self._ensured) < 4096:   # registered functions: a few hundred
                self._ensured[func] = ensured
        return ensured
