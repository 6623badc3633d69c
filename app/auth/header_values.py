"""What an identity header value must be before it may name anyone (mode ``headers``).

One byte string, one identity: a proxy user ``admin`` + U+00A0 must never become ``admin``. So a value is

- decoded as UTF-8, strictly (proxies send non-ASCII names as UTF-8; a Latin-1 fallback would give two byte
  strings, ``E9`` and ``C3 A9``, the same subject ``é``);
- trimmed of HTTP's own optional whitespace only (SP and HTAB, RFC 9110 §5.6.3), never of Unicode
  whitespace (``str.strip()`` would also take NBSP, U+2028, U+3000, …);
- refused when it still holds a character that is not printable: controls (Cc), format characters (Cf:
  zero-width space and joiners, bidi overrides, BOM), any whitespace but U+0020 (NBSP, line and paragraph
  separators, ideographic space), surrogates, private-use and unassigned code points.

No Unicode normalisation (NFC/NFKC) and no case folding: the proxy authenticated those exact code points,
and folding would merge distinct proxy accounts (NFKC maps the fullwidth letters U+FF41… to ``admin``). Policy
audiences match code point for code point.
"""

from __future__ import annotations

OWS = " \t"      # RFC 9110 §5.6.3: the only whitespace trimmed


class UnsafeHeaderValue(ValueError):
    """The value is not UTF-8, or holds a control, format or non-HTTP whitespace character."""


def decoded(value: str) -> str:
    """A WSGI header value (bytes carried as Latin-1 text) as UTF-8 text. :raises UnsafeHeaderValue:"""
    if value.isascii():       # the common case: ASCII is UTF-8 as it is
        return value
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        raise UnsafeHeaderValue("not UTF-8") from None


def is_printable(text: str, *, tabs: bool = False) -> bool:
    """Every character printable (letters, marks, digits, punctuation, symbols, U+0020); ``tabs`` also
    lets HTAB through (JSON whitespace in the grants header)."""
    return text.isprintable() if not (tabs and "\t" in text) else text.replace("\t", " ").isprintable()


def identity_text(value: str, *, tabs: bool = False) -> str:
    """The value decoded and trimmed of SP/HTAB (possibly empty). :raises UnsafeHeaderValue: not UTF-8, or
    an unprintable character left inside (``tabs``: HTAB allowed inside)."""
    if value.isascii() and value.isprintable():   # the common case, already safe (no HTAB either)
        return value.strip(OWS)
    text = decoded(value).strip(OWS)
    if not is_printable(text, tabs=tabs):
        raise UnsafeHeaderValue("holds a control, format or non-HTTP whitespace character")
    return text
