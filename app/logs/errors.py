"""Engine log failures → the LOG problems of docs/logs.md (a vanished object → the generic 404)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from werkzeug.exceptions import NotFound

from app.engine.logs import FrameError, LogReadFailed, LogsUnavailable, LogTargetGone
from app.errors import ProblemError


@contextmanager
def engine_problems(*, live: bool) -> Iterator[None]:
    """Inside: engine log calls. ``live`` picks LOG008 (stream not opened) over LOG006 for open failures."""
    try:
        yield
    except LogTargetGone as exc:
        raise NotFound(f"The engine has no logs for {exc}: it is gone.") from None
    except LogsUnavailable as exc:
        raise ProblemError("LOG008" if live else "LOG006", detail=str(exc)) from None
    except LogReadFailed as exc:
        raise ProblemError("LOG006", detail=f"The engine's log stream broke off: {exc}") from None
    except FrameError as exc:
        raise ProblemError("LOG007", detail=str(exc)) from None
