"""Query parameters documented as the views parse them, so that a fuzzer's "schema-valid" and "refused"
agree with the server's (docs/api-documents.md).

* Lenient integers: the server ignores a ``limit``/``offset`` that is not a number
  (``app.query.paging.client_int``: the default applies) instead of refusing it. Documented as
  ``type: integer``, ``limit=null`` looked refused while the server answered 200; the document now says an
  integer, or any other text, which is ignored.
* Texts that must hold something: a blank ``q`` or ``resourceId`` is refused, so the pattern asks for one
  character that is not white space.
* Comma lists of known words (``severity``, ``kind``, ``check`` of ``/recommendations``): case-insensitive,
  blanks around items and empty items skipped, an unknown word refused (API012): the pattern says exactly that.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from marshmallow import fields

IGNORED_TEXT = {"type": "string", "description": "not a number: ignored (the default applies)"}
# Unanchored: somewhere a character that Python's str.strip() keeps (its white space, not ECMA-262's \s,
# which lacks U+001C..U+001F and U+0085 and adds U+FEFF).
PYTHON_WHITESPACE = "\t-\r \x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
NOT_BLANK = f"[^{PYTHON_WHITESPACE}]"
# /search also drops control characters before trimming (app.query.search): one printable character needed.
PRINTABLE_NOT_BLANK = f"[^{PYTHON_WHITESPACE}\x00-\x1f\x7f]"


def lenient_integer_schema(minimum: int | None = None) -> dict[str, Any]:
    """The JSON Schema of a lenient integer: the number (from ``minimum``) or any other text (ignored)."""
    number: dict[str, Any] = {"type": "integer"}
    if minimum is not None:
        number["minimum"] = minimum
    return {"anyOf": [number, dict(IGNORED_TEXT)]}


def LenientInteger(description: str, minimum: int | None = None) -> fields.Raw:
    """A documented-only query field (views parse it themselves) for :func:`lenient_integer_schema`."""
    return fields.Raw(metadata={"description": description, **lenient_integer_schema(minimum)})


def _any_case(word: str) -> str:
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)


def choice_list_pattern(words: Iterable[str]) -> str:
    """An ECMA-262 pattern (no inline flags) of a comma list of ``words`` in any case, blanks and empty items
    allowed, the whole text blank allowed (it means no filter)."""
    word = "(?:" + "|".join(_any_case(w) for w in sorted(words, key=len, reverse=True)) + ")"
    blank, gap = f"[{PYTHON_WHITESPACE}]*", f"[{PYTHON_WHITESPACE},]*"
    return f"^{gap}(?:{word}{blank}(?:,{gap}{word}{blank})*)?{gap}$"
