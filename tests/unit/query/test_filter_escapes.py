"""CEL string escapes exactly as the CEL language definition (google/cel-spec doc/langdef.md, "String and
Bytes Values"): every escape it lists decodes, anything else after a backslash is FLT002 at the
backslash, and raw strings are taken as written.

celpy's lexer accepts any character after a backslash and its decoder keeps unknown escapes (``"\\d"`` stayed
backslash-d); these tests pin the stricter behaviour.
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from app.errors import ProblemError
from app.query.filter import compile_filter
from app.resources import ResourceKind

TASK: Mapping[str, str | int] = {
    "id": "t1", "state": "running", "desired_state": "running", "image": "a.b:1", "exit_code": 0,
    "error": "", "service": "web", "node": "n1", "slot": 3,
}


def evaluate(expression: str) -> bool:
    result = compile_filter(expression, ResourceKind.TASK)(TASK)
    assert type(result) is bool
    return result


def problem(expression: str) -> ProblemError:
    with pytest.raises(ProblemError) as caught:
        compile_filter(expression, ResourceKind.TASK)
    return caught.value


@pytest.mark.parametrize("expression", [
    r'"\?" == "?"',
    r'"\`" == "`"',
    r'"\X41" == "A"',
    r'"\x41\x4a\x4A" == "AJJ"',
    r'"\101" == "A"',
    r'"\000" == "\x00" && size("\000") == 1',
    r'"\377" == "\xFF" && "\377" == "ÿ"',
    r'"\303\277" == "Ã¿"',
    r'"\u00e9" == "é" && "\u00E9" == "é"',
    r'"\U0001F600" == "😀"',
    r'"\u12345" == "ሴ5"',                        # four digits, then a literal 5
    r'"\uD83D\uDE00" == "😀"',
    r'size("\uD83D\uDE00") == 1',
    r'"\uD83D\uDE00" == "\U0001F600"',
    r'"\a\b\f\n\r\t\v" == "\x07\x08\x0C\x0A\x0D\x09\x0B"',
    r'"\\" == "\x5C" && size("\\") == 1',
    '"\\"" == \'"\' && size("\\"") == 1',
    r"'\'' == " + '"' + "'" + '"',
    r'"""a\tb\"""" == "a	b\""',
    r"'''x\'''' == " + '"' + "x'" + '"',
    r'"a\\.b" == r"a\.b"',
    r'image.matches("^a\\.b:")',
    r'image.matches(r"^a\.b:\d$")',
])
def test_every_escape_of_the_definition_decodes(expression: str) -> None:
    assert evaluate(expression) is True


@pytest.mark.parametrize("expression", [
    r'r"\d" == "\\d"',
    r'R"\q\400\uD800" == "\\q\\400\\uD800"',
    r"r'\x' == '\\x'",
    r'r"""\z""" == "\\z"',
])
def test_raw_strings_are_taken_as_written(expression: str) -> None:
    assert evaluate(expression) is True


@pytest.mark.parametrize(("expression", "position"), [
    (r'"\d" == "d"', 1),                          # the behaviour change: was backslash-d
    (r'state == "x\d"', 11),
    (r'image.matches("\d+")', 15),
    (r'"\q" == "q"', 1),
    (r'"\ " == " "', 1),
    (r'"\400" == "x"', 1),                        # octal above 377
    (r'"\777" == "x"', 1),
    (r'"\8" == "x"', 1),
    (r'"\08" == "x"', 1),
    (r'"\1" == "x"', 1),
    (r'"\12" == "x"', 1),
    (r'"\x4" == "x"', 1),
    (r'"\xZZ" == "x"', 1),
    (r'"\X4g" == "x"', 1),
    (r'"\u12" == "x"', 1),
    (r'"\U0000004" == "x"', 1),
    (r'"\uD83D" == "x"', 1),                      # lone high surrogate
    (r'"\uDE00" == "x"', 1),                      # lone low surrogate
    (r'"\uD83D\u0041" == "x"', 1),                # high surrogate not followed by a low one
    (r'"\uD83Dx" == "x"', 1),
    (r'"ab\uDE00\uD83D" == "x"', 3),              # low before high is not a pair
    (r'"\U0000D800" == "x"', 1),                  # \U of a surrogate
    (r'"\U00110000" == "x"', 1),                  # beyond U+10FFFF
    (r'"\c" == "x"', 1),
    ("\"ok\" == \"ok\" && state == '\\e'", 26),
    ('"""a\\\nb""" == "x"', 4),                   # backslash-newline in a triple-quoted string
    (r'"\"', 1),                                  # the lexer ends the string at the second quote
])
def test_anything_else_after_a_backslash_is_flt002_at_the_backslash(expression: str, position: int) -> None:
    error = problem(expression)
    assert error.code == "FLT002"
    assert error.extra["position"] == position
    assert "escape" in error.detail or "backslash" in error.detail or "surrogate" in error.detail \
        or "code point" in error.detail


def test_the_detail_says_how_to_write_a_backslash() -> None:
    assert r"\\d" in problem(r'image.matches("\d")').detail
