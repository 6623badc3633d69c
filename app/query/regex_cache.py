"""RE2 programs for ``matches()``, compiled with a memory budget and cached by pattern within bounds.

Why
    RE2 searches in linear time, but compiling is not free: a counted Unicode class such as ``\\pL{400}``
    expands to about 480,000 instructions, took 280 ms and 8 MB with RE2's default 8 MiB ``max_mem``,
    and ``re2.compile`` keeps the last 128 programs in its own unbounded-in-bytes LRU. Filters whose
    pattern depends on a field compiled one such program per item: 30 s on the hub.

What this module does
    - Every program is compiled with ``max_mem = RE2_MAX_MEM`` (512 KiB). RE2 refuses a larger program
      after about 2 to 3 ms with "pattern too large" instead of building it; the most expensive pattern it
      accepts compiles in about 8 ms (``\\pL{25}``, 30,000 instructions). A refused constant pattern is
      FLT006 when the filter is compiled; a refused pattern built from a field is FLT006 for that item
      (an evaluation error, so CEL's ``||``/``&&`` rules apply to it as to FLT003). A pattern RE2 cannot
      parse stays FLT002 (constant) or FLT003 (per item).
    - Programs are compiled through ``re2._Regexp`` directly, bypassing ``re2.compile``'s private cache,
      so this cache is the only one holding them.
    - The cache holds at most ``MAX_PROGRAMS`` (1,024) patterns and ``MAX_BYTES`` (48 MiB) of estimated
      program memory, least recently used out first. Refusals are cached too (they are small), so a
      repeated refused pattern costs a dict lookup.
    - After each compilation (a cache miss) the request's budget is charged (``budget.charge``), so a
      filter that compiles many patterns yields between them and stops at its budget.

Size estimate (``estimate_bytes``)
    Measured RSS per cached program on the project's machine: about 8 bytes per instruction of the
    forward program (197 KiB for 23,926 instructions), plus a reverse program and DFA state caches
    that RE2 builds lazily within the same ``max_mem``. The estimate counts 32 bytes per forward
    instruction (room for a reverse program of equal size and the DFA caches), capped at ``max_mem``,
    which RE2 itself keeps a program under, plus 1 KiB of fixed overhead and twice the pattern's length.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import re2

from app.query import budget
from app.query.lru import BoundedLRU, LRUStats

RE2_MAX_MEM = 512 * 1024
MAX_PROGRAMS = 1024
MAX_BYTES = 48 * 1024 * 1024
FIXED_OVERHEAD = 1024
BYTES_PER_INSTRUCTION = 32

_TOO_LARGE = "pattern too large"


class RegexError(Exception):
    """A pattern RE2 cannot use; ``too_costly`` tells a refusal for size from an invalid pattern."""

    def __init__(self, message: str, too_costly: bool) -> None:
        super().__init__(message)
        self.too_costly = too_costly


@dataclass(frozen=True, slots=True)
class _Program:
    regex: Any            # re2._Regexp, or None when refused
    error: str | None
    too_costly: bool
    size: int


def options(max_mem: int = RE2_MAX_MEM) -> Any:
    opts = re2.Options()
    opts.log_errors = False               # an invalid pattern is the client's error, not a log line
    opts.max_mem = max_mem
    return opts


_OPTIONS = options()


def estimate_bytes(pattern: str, program_size: int, max_mem: int = RE2_MAX_MEM) -> int:
    return FIXED_OVERHEAD + 2 * len(pattern) + min(max_mem, BYTES_PER_INSTRUCTION * max(program_size, 0))


def _describe(exc: BaseException) -> str:
    text = str(exc)
    if text.startswith(("b'", 'b"')) and len(text) > 3:     # pybind11 hands RE2's message over as bytes
        text = text[2:-1]
    return text


def _compile(pattern: str) -> _Program:
    overhead = FIXED_OVERHEAD + 2 * len(pattern)
    try:
        regex = re2._Regexp(pattern, _OPTIONS)
    except (re2.error, ValueError, TypeError) as exc:   # ValueError: e.g. a lone surrogate in the pattern
        message = _describe(exc)
        return _Program(None, message, message.startswith(_TOO_LARGE), overhead)
    return _Program(regex, None, False, estimate_bytes(pattern, regex.programsize))


class RegexCache:
    def __init__(self, max_programs: int = MAX_PROGRAMS, max_bytes: int = MAX_BYTES) -> None:
        self._lru: BoundedLRU[str, _Program] = BoundedLRU(max_programs, max_bytes)

    def compile(self, pattern: str) -> tuple[Any, int]:
        """The compiled program and its estimated size; RegexError when RE2 refuses the pattern."""
        program = self._lru.get(pattern)
        if program is None:
            program = _compile(pattern)
            self._lru.put(pattern, program, program.size)
            budget.charge()                 # after storing: work done before a cut-off is kept
        if program.regex is None:
            assert program.error is not None
            raise RegexError(program.error, program.too_costly)
        return program.regex, program.size

    def stats(self) -> LRUStats:
        return self._lru.stats()

    def clear(self) -> None:
        self._lru.clear()


CACHE = RegexCache()


def compile_regex(pattern: str) -> tuple[Any, int]:
    return CACHE.compile(pattern)
