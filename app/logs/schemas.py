"""Version-1 schemas of the log page, for the OpenAPI document (bodies are built by ``app.logs.page``)."""

from __future__ import annotations

from marshmallow import Schema, fields, validate

from app.logs.lines import STREAMS
from app.schemas.query_params import PYTHON_WHITESPACE, LenientInteger

# What ``app.logs.timestamps.parse_instant`` accepts, as an ECMA-262 pattern (docs/api-documents.md): blanks
# around (stripped), then an RFC 3339 date-time from 1970 to 9999 (real dates, leap years included; hours to
# 23, offsets to 23:59, a leap second, any fraction) or a Go duration (``0``, or 1 to 4 parts such as
# ``1h30m``, ``.5s``, ``250ms``). Narrower than the parser in three places, so that every value it allows is
# accepted: on 1970-01-01 an offset may not reach before the epoch (no ``+hh:mm`` but ``+00:00``), on
# 9999-12-31 not past 9999 (no ``-hh:mm`` but ``-00:00``), and a duration has at most 4 parts of at most
# 5 digits of hours (6 of minutes, 8 of seconds, 11 of ms, 14 of µs, 17 of ns) before the point: at most
# 45 years back, never before 1970. Wider durations the parser takes (``1000000s``) are accepted too.
_BLANKS = f"[{PYTHON_WHITESPACE}]*"
_YEAR = "(?:19[7-9][0-9]|[2-9][0-9]{3})"
_LEAP_YEAR = "(?:19(?:7[26]|8[048]|9[26])|[2-9][0-9](?:0[48]|[2468][048]|[13579][26])|(?:[2468][048]|[3579][26])00)"
_MONTH_DAY = ("(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"
              "|02-(?:0[1-9]|1[0-9]|2[0-8]))")
_TIME = "[Tt ](?:[01][0-9]|2[0-3]):[0-5][0-9]:(?:[0-5][0-9]|60)(?:\\.[0-9]+)?"
_OFFSET = "(?:[01][0-9]|2[0-3]):[0-5][0-9]"
_RFC3339 = (f"(?:(?!1970-01-01|9999-12-31)(?:{_YEAR}-{_MONTH_DAY}|{_LEAP_YEAR}-02-29){_TIME}(?:[Zz]|[+-]{_OFFSET})"
            f"|1970-01-01{_TIME}(?:[Zz]|-{_OFFSET}|\\+00:00)|9999-12-31{_TIME}(?:[Zz]|\\+{_OFFSET}|-00:00))")
_UNIT_DIGITS = {"h": 5, "m": 6, "s": 8, "ms": 11, "(?:us|\u00b5s|\u03bcs)": 14, "ns": 17}
_DURATION_PART = "(?:" + "|".join(f"(?:[0-9]{{1,{digits}}}(?:\\.[0-9]*)?|\\.[0-9]+){unit}"
                                  for unit, digits in _UNIT_DIGITS.items()) + ")"
INSTANT_PATTERN = f"^{_BLANKS}(?:{_RFC3339}|0|{_DURATION_PART}{{1,4}}){_BLANKS}$"
_INSTANT = {"type": "string", "pattern": INSTANT_PATTERN}


class LogLineV1(Schema):
    timestamp = fields.String(metadata={"description": "RFC 3339 with nanoseconds, UTC",
                                        "example": "2026-04-13T08:12:34.123456789Z"})
    message = fields.String()
    stream = fields.String(validate=validate.OneOf(STREAMS))
    attrs = fields.Dict(keys=fields.String(), metadata={
        "description": "nodeId, serviceId, taskId (engine details, shortened), serviceName and slot "
                       "(from the cache), and any log-opt attributes"})
    json = fields.Dict(metadata={"description": "the message decoded, when it is a JSON object"})


class LogResponseV1(Schema):
    context = fields.String(data_key="@context")
    id_ = fields.String(data_key="@id")
    type_ = fields.String(data_key="@type", metadata={"example": "LogResponse"})
    lines = fields.List(fields.Nested(LogLineV1), metadata={"description": "oldest first; the newest limit"})
    oldest = fields.String(allow_none=True)
    newest = fields.String(allow_none=True)
    hasMore = fields.Boolean(metadata={"description": "older matching lines exist (cut by limit) or may exist "
                                                      "(the engine sent as many lines as it was asked for)"})
    cursor = fields.String(allow_none=True, metadata={
        "description": "newest line's timestamp + 1 ns; pass it as since to get only newer lines. With no "
                       "line: the start the request gave (since as given, after + 1 ns), else null"})


class LogArgsV1(Schema):
    limit = LenientInteger("JSON: lines kept, default 500, max 10000 (clamped); ≤0 or not an integer → 500")
    after = fields.String(metadata={"description": "RFC 3339 (nano) timestamp or duration (1h30m, before now), "
                                                   "1970..9999; lines at or before it are dropped (LOG003)",
                                    **_INSTANT})
    since = fields.String(metadata={"description": "as after, but inclusive: lines older than it are dropped "
                                                   "(the cursor's parameter)", **_INSTANT})
    before = fields.String(metadata={"description": "JSON only: lines at or after it are dropped (LOG004; on a "
                                                    "live stream LOG005)", **_INSTANT})
    stream = fields.String(validate=validate.OneOf(STREAMS), metadata={"description": "stdout or stderr (LOG002)"})
