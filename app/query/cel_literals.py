"""CEL literals: string escapes exactly as the CEL language definition, and integer literals in range.

The compiler (``app.query.cel_compile``) turns literal tokens of celpy's parse tree into values here; celpy's
own lexer accepts any character after a backslash, so escapes are checked against the definition, and an
invalid one is reported with the offset of its backslash (FLT002 with ``position``).
"""

from __future__ import annotations

from types import MappingProxyType

_SIMPLE_ESCAPES = MappingProxyType({
    "a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", '"': '"', "'": "'",
    "\\": "\\", "?": "?", "`": "`",
})
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_HEX_LENGTHS = MappingProxyType({"x": 2, "X": 2, "u": 4, "U": 8})


class EscapeError(ValueError):
    """An invalid escape sequence; ``offset`` is that of its backslash within the literal's token."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


def _hex_escape(body: str, at: int) -> tuple[int, int]:
    """The code point of the ``\\x``/``\\X``/``\\u``/``\\U`` escape at ``body[at]`` and where it ends."""
    letter = body[at + 1]
    digits = body[at + 2:at + 2 + _HEX_LENGTHS[letter]]
    if len(digits) != _HEX_LENGTHS[letter] or not set(digits) <= _HEX_DIGITS:
        raise EscapeError(f"\\{letter} needs {_HEX_LENGTHS[letter]} hexadecimal digits", at)
    return int(digits, 16), at + 2 + len(digits)


def _unescape_body(body: str, base: int) -> str:
    """Decode CEL escapes in a non-raw string body; ``base`` is the body's offset within the token.

    Exactly the escapes of the CEL language definition (``doc/langdef.md``, String and Bytes Values):
    ``\\ \\? \\" \\' \\` \\a \\b \\f \\n \\r \\t \\v``, ``\\x``/``\\X`` + 2 hex digits, ``\\u`` + 4,
    ``\\U`` + 8, and three octal digits from ``\\000`` to ``\\377``. A ``\\u`` high surrogate followed by a
    ``\\u`` low surrogate is one code point (the definition's way to write characters outside the BMP);
    a lone surrogate, or a ``\\U`` surrogate or value over U+10FFFF, is not a code point and is invalid.
    Anything else after a backslash (``\\d``, ``\\8``, ``\\400``) is an invalid escape.
    """
    parts: list[str] = []
    index, end = 0, len(body)
    while index < end:
        slash = body.find("\\", index)
        if slash < 0:
            parts.append(body[index:])
            break
        parts.append(body[index:slash])
        index = _escape(body, slash, parts, base)
    return "".join(parts)


def _escape(body: str, at: int, parts: list[str], base: int) -> int:
    """Append the value of the escape at ``body[at]`` to ``parts``; return where it ends."""
    following = body[at + 1:at + 2]
    if not following:
        raise EscapeError("a backslash ends the string", base + at)
    simple = _SIMPLE_ESCAPES.get(following)
    if simple is not None:
        parts.append(simple)
        return at + 2
    if following in "01234567":
        digits = body[at + 1:at + 4]
        if len(digits) != 3 or not set(digits) <= set("01234567") or digits[0] not in "0123":
            raise EscapeError(f"octal escape \\{digits} is not three octal digits from 000 to 377", base + at)
        parts.append(chr(int(digits, 8)))
        return at + 4
    if following not in _HEX_LENGTHS:
        raise EscapeError(f"\\{following} is not a CEL escape (write \\\\{following} for a backslash)", base + at)
    try:
        code, stop = _hex_escape(body, at)
    except EscapeError as exc:
        raise EscapeError(str(exc), base + at) from None
    if following == "u" and 0xD800 <= code <= 0xDBFF:            # high surrogate: needs its low half
        if body[stop:stop + 2] == "\\u":
            with_low = _try_hex(body, stop)
            if with_low is not None and 0xDC00 <= with_low[0] <= 0xDFFF:
                parts.append(chr(0x10000 + ((code - 0xD800) << 10) + (with_low[0] - 0xDC00)))
                return with_low[1]
        raise EscapeError(f"\\u{code:04X} is a high surrogate without a following \\u low surrogate",
                          base + at)
    if 0xD800 <= code <= 0xDFFF or code > 0x10FFFF:
        raise EscapeError(f"{body[at:stop]} is not a Unicode code point", base + at)
    parts.append(chr(code))
    return stop


def _try_hex(body: str, at: int) -> tuple[int, int] | None:
    try:
        return _hex_escape(body, at)
    except EscapeError:
        return None


def decode_string(text: str) -> str:
    """The value of a STRING_LIT/MLSTRING_LIT token; EscapeError (offset in ``text``) on a bad escape.

    Raw strings (``r"..."``) are taken as written. Newlines inside triple-quoted strings are kept
    (celpy drops them). celpy's lexer accepts any character after a backslash, so the escapes are
    checked here, against the CEL definition, not celpy's more lenient decoding.
    """
    raw = text[0] in "rR"
    prefix = 1 if raw else 0
    quote = 3 if text[prefix:prefix + 3] in ('"""', "'''") else 1
    body = text[prefix + quote:len(text) - quote]
    if raw or "\\" not in body:
        return body
    return _unescape_body(body, prefix + quote)


def parse_int_literal(text: str, limit_low: int, limit_high: int) -> int | None:
    negative = text.startswith("-")
    digits = text[1:] if negative else text
    value = int(digits[2:], 16) if digits[:2] in ("0x", "0X") else int(digits, 10)
    value = -value if negative else value
    return value if limit_low <= value <= limit_high else None
