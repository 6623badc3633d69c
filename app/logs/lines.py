"""``LogLine``: one engine log line, parsed once from its payload, rendered as JSON or as a text line.

The engine writes each line as ``<RFC 3339 nano timestamp> <details> <message>`` when asked for
``timestamps`` and ``details``; the details are ``key=value`` pairs, query-escaped and comma-separated
(``com.docker.swarm.node.id=…,com.docker.swarm.service.id=…,com.docker.swarm.task.id=…`` plus any
``--log-opt labels/env`` attributes), empty when there are none. The swarm keys are shortened to
``nodeId``, ``serviceId``, ``taskId`` (docs/logs.md). A message that is a JSON object is also given
decoded (``json``), so structured loggers need no second parse by the client.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote_plus

from app.logs.timestamps import TimeFormatError, format_rfc3339, parse_rfc3339

STDOUT, STDERR = "stdout", "stderr"
STREAMS = (STDOUT, STDERR)
MAX_JSON_MESSAGE = 64 * 1024      # longer messages are not tried as JSON (bounded work per line)
_SHORT_KEYS = {"com.docker.swarm.node.id": "nodeId", "com.docker.swarm.service.id": "serviceId",
               "com.docker.swarm.task.id": "taskId"}


class LineFormatError(ValueError):
    """A payload without the timestamp prefix the engine was asked for (reported as LOG007)."""


@dataclass(slots=True)
class LogLine:
    ns: int                                   # timestamp, nanoseconds since the epoch (UTC)
    stream: str                               # "stdout" | "stderr"
    message: str
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def timestamp(self) -> str:
        return format_rfc3339(self.ns)

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"timestamp": self.timestamp, "message": self.message, "stream": self.stream}
        if self.attrs:
            body["attrs"] = self.attrs
        decoded = decode_json_message(self.message)
        if decoded is not None:
            body["json"] = decoded
        return body

    def to_text(self) -> str:
        """``<timestamp> <service>.<slot> <stream> <message>``: one line, ``-`` for an unknown label."""
        return f"{self.timestamp} {label_of(self.attrs)} {self.stream} {self.message}"


def label_of(attrs: dict[str, Any]) -> str:
    name = attrs.get("serviceName")
    if not name:
        return str(attrs.get("taskId") or "-")
    slot = attrs.get("slot")
    return f"{name}.{slot if slot is not None else attrs.get('nodeId', '-')}"


def parse_line(stream: str, payload: bytes, *, details: bool = True) -> LogLine:
    """One line's payload (its trailing newline included or not) → ``LogLine``."""
    text = payload.decode("utf-8", "replace")
    if text.endswith("\n"):
        text = text[:-1]
    if text.endswith("\r"):
        text = text[:-1]
    stamp, space, rest = text.partition(" ")
    try:
        ns = parse_rfc3339(stamp)
    except TimeFormatError as exc:
        raise LineFormatError(f"log line without a timestamp: {text[:80]!r}") from exc
    if not space:
        return LogLine(ns, stream, "")
    attrs: dict[str, Any] = {}
    if details:
        raw_attrs, _, rest = rest.partition(" ")
        attrs = parse_details(raw_attrs)
    return LogLine(ns, stream, rest, attrs)


def parse_details(raw: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for pair in raw.split(","):
        key, equals, value = pair.partition("=")
        if not equals:
            continue
        key = unquote_plus(key)
        attrs[_SHORT_KEYS.get(key, key)] = unquote_plus(value)
    return attrs


def decode_json_message(message: str) -> dict[str, Any] | None:
    """The message as a JSON object, or None (not JSON, not an object, or too long to try)."""
    stripped = message.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")) or len(stripped) > MAX_JSON_MESSAGE:
        return None
    try:
        value = json.loads(stripped)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
