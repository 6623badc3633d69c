"""The ``filter`` list parameter: a CEL expression compiled once into a fast per-item predicate.

Why not celpy's evaluator
    List requests filter up to 50,000 cached items inside a gevent worker, where CPU time blocks every
    other request and event stream. celpy's interpreter costs 100 to 500 µs per item (seconds per
    request). We still use celpy's parser (its lark grammar), but type-check the tree once against the
    kind's field table (``ResourceKind.X.spec.filter_fields``) and compile it into nested plain-Python
    closures over the precomputed activation dict (every field present: ``""``/``0`` when unset). A
    typical filter costs 0.1 to 0.3 µs per item (``bench/bench_filter.py``). Compiled predicates are
    cached by (expression, kind) in an LRU bounded in entries and estimated bytes (``MAX_CACHED_FILTERS``,
    ``MAX_CACHED_BYTES``); compiling takes 1 to 5 ms (celpy's grammar, about 90 ms to build, is built
    at import, or read back from ``__pycache__`` in 5 ms: ``cel_parser``). Sub-expressions without
    fields are folded at compile time, ``field <op> literal`` and ``field in [literals]`` become single
    closures, and ``matches`` with a constant pattern memoises its answer per distinct text (at most 4096
    texts and ``MEMO_BYTES`` per predicate: the only mutable state, and it hangs off a cached predicate).
    RE2 programs come from ``app.query.regex_cache`` (compiled under a 512 KiB memory budget, cached by
    pattern); evaluation runs under the request's ``app.query.budget`` (see ``app.query.listing``).

Supported language (a statically typed subset of CEL)
    - Literals: int (decimal, hex, ``-`` sign), uint (``1u``), double, string (single, double and
      triple quotes, raw ``r"..."``, exactly the escapes of the CEL language definition: anything else
      after a backslash, such as ``"\\d"``, is FLT002 at the backslash; see ``cel_literals.decode_string``),
      ``true``/``false``, ``null``, lists ``[a, b]``.
    - Identifiers: the kind's filter fields (string or int).
    - ``== != < <= > >=`` on two operands of the same type (ordering on int, uint, double, string,
      bool; equality also on lists and null), ``in`` and ``not in`` on lists, ``&& || !``, ``c ? a : b``.
    - Arithmetic ``+ - * / %`` and unary ``-`` on int (64-bit, division truncates toward zero, the
      remainder takes the dividend's sign, overflow and division by zero are errors), on uint (``%`` too)
      and on double (no ``%``; IEEE 754 division); ``+`` also concatenates strings and lists.
    - ``s.contains(t)``, ``s.startsWith(t)``, ``s.endsWith(t)``, ``s.matches(re)``/``matches(s, re)``
      (RE2 search, the same library celpy uses), ``size(x)``/``x.size()`` on strings and lists,
      ``list[i]``, ``int(x)`` (from int, uint, double, decimal string) and ``string(x)`` (from
      string, int, uint).
    - ``a not in b`` is not CEL syntax; it is accepted and means ``!(a in b)`` (see ``_rewrite_not_in``).
    - Everything else celpy parses (maps, macros such as ``all``/``exists``/``has``, field selection,
      bytes, other functions) is rejected with FLT002 "not supported", as is nesting deeper than 128
      operations (compilation and evaluation recurse once per level; this keeps them far from Python's
      recursion limit whatever the caller's stack depth).

Semantics chosen
    - Static types, as CEL's type checker (cel-go) does: an operation on mismatched types
      (``slot == "x"``, ``name > 3``, ``state.contains(1)``, ``slot == 1.0``) is FLT002 with the
      operator's position. celpy has no checker: it raises on such operations at evaluation time, but
      its commutative ``&&``/``||`` can hide the error per item (``slot == "x" || state == "a"`` is true
      for some items there). A filter that only works by masking a type error is a mistake, so it is
      rejected before any item is looked at.
    - Runtime errors (overflow, division by zero, index out of range, a non-numeric ``int("x")``, an
      invalid dynamic regular expression) follow celpy: ``&&``/``||`` are commutative over errors
      (``error || true`` is true, ``error && false`` is false, otherwise the error wins), ``?:`` only
      evaluates the chosen branch. An error that reaches the top raises FLT003 for the item.
    - Where celpy departs from the CEL specification we follow the specification (documented
      divergences, excluded from the parity test): a negative list index is an error (celpy indexes from
      the end), ``int("...")`` accepts only ``[+-]digits`` (celpy also takes ``0x``, spaces and
      underscores), double division by zero gives ±inf or NaN (celpy always gives +inf), out-of-range
      int literals and invalid constant regular expressions are FLT002 at compile time (celpy fails
      per evaluation), ``contains`` works on concatenated strings (celpy fails there), and newlines in
      triple-quoted strings are kept.

Error codes: FLT001 longer than 512 characters; FLT002 syntax, type or unsupported construct
(``position`` = 0-based offset into the original expression, or None); FLT003 evaluation failed for an
item; FLT004 unknown field (``position``, ``field``); FLT005 the expression is not boolean; FLT006 too
costly: a constant ``matches`` pattern RE2 refuses for its size (at compile time, with ``position``), a
pattern built from a field that RE2 refuses for its size (per item, under CEL's error rules like FLT003),
or the request's work ran over its budget (``app.query.budget``).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path

import lark
from celpy import celparser
from celpy.celparser import CELParseError, CELParser
from lark import Lark, Token, Tree
from lark.exceptions import LarkError, UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from app.errors import ProblemError
from app.query.cel_compile import BOOL, Compiled, Node, compile_tree
from app.query.lru import BoundedLRU, LRUStats
from app.resources import ResourceKind

Predicate = Callable[[Mapping[str, str | int]], bool]

MAX_FILTER_LENGTH = 512

_SKIPPED = re.compile(r"(?:[\t\n\f\r ]+|//[^\n]*)*")     # what celpy's grammar ignores
_NEEDS_TOKENS = re.compile(r"\bnot\b|\btrue\b|\bfalse\b")
# Lexer terminals that can end an operand, i.e. that may precede a binary operator such as `not in`.
_OPERAND_ENDS = frozenset({"IDENT", "INT_LIT", "UINT_LIT", "FLOAT_LIT", "STRING_LIT", "MLSTRING_LIT",
                           "BYTES_LIT", "BOOL_LIT", "NULL_LIT", "RPAR", "RSQB", "RBRACE"})


MAX_CACHED_FILTERS = 256
MAX_CACHED_BYTES = 8 * 1024 * 1024
# The closures of a compiled filter kept about 125 bytes per character of the expression (tracemalloc,
# 450-character filters); the estimate doubles that, and adds the RE2 programs and memos it holds.
PREDICATE_OVERHEAD = 2048
BYTES_PER_CHARACTER = 256

_CACHE: BoundedLRU[tuple[str, ResourceKind], Predicate] = BoundedLRU(MAX_CACHED_FILTERS, MAX_CACHED_BYTES)


def compile_filter(expression: str, kind: ResourceKind) -> Predicate:
    """Compile ``expression`` for items of ``kind``; the predicate raises FLT003 when an item fails.

    Cached by (expression, kind) in a bounded LRU (``MAX_CACHED_FILTERS`` entries, ``MAX_CACHED_BYTES``
    estimated bytes, see ``cel_compile.Compiled``); failed compilations are not cached.
    """
    key = (expression, kind)
    predicate = _CACHE.get(key)
    if predicate is None:
        predicate, size = build_filter(expression, kind)
        _CACHE.put(key, predicate, size)
    return predicate


def build_filter(expression: str, kind: ResourceKind) -> tuple[Predicate, int]:
    """Uncached ``compile_filter``: the predicate and the estimate of the bytes it keeps alive."""
    compiled = _compile(expression, kind)
    if compiled.node.type != BOOL:
        raise ProblemError("FLT005", detail=f"The filter evaluates to {compiled.node.type}, not bool.")
    predicate: Predicate = compiled.node.fn
    return predicate, PREDICATE_OVERHEAD + BYTES_PER_CHARACTER * len(expression) + compiled.held_bytes


def filter_cache_stats() -> LRUStats:
    return _CACHE.stats()


def clear_filter_cache() -> None:
    _CACHE.clear()


def compile_expression(expression: str, kind: ResourceKind) -> Node:
    """Parse and type-check ``expression`` of any type (uncached): ``node.fn(activation)`` is its value.

    ``compile_filter`` is this plus the check for bool; tests use it to compare values with celpy.
    """
    return _compile(expression, kind).node


def _compile(expression: str, kind: ResourceKind) -> Compiled:
    if len(expression) > MAX_FILTER_LENGTH:
        raise ProblemError("FLT001", detail=f"The filter has {len(expression)} characters; at most "
                                            f"{MAX_FILTER_LENGTH} are allowed.")
    tokens = _lex(expression) if _NEEDS_TOKENS.search(expression) else []
    text, negated_in_ends = _rewrite_not_in(expression, tokens)
    tree = _parse(text, expression)
    _restore_bool_positions(tree, tokens)
    try:
        return compile_tree(tree, kind.spec.filter_fields, negated_in_ends)
    except RecursionError:
        raise ProblemError("FLT002", detail="The filter is nested too deeply.",
                           extra={"position": None}) from None


def _lex(expression: str) -> list[Token]:
    """celpy's terminals for ``expression``, as far as they lex (the parser reports what does not).

    celpy's lexer callback turns IDENT ``true``/``false`` into fresh BOOL_LIT tokens without a
    position; they get theirs back here: after the previous token, whitespace and comments, the literal.
    """
    lark_parser = CELParser.CEL_PARSER
    assert lark_parser is not None
    tokens: list[Token] = []
    with contextlib.suppress(LarkError):
        tokens.extend(lark_parser.lex(expression))
    end = 0
    for index, token in enumerate(tokens):
        if token.start_pos is None:
            skipped = _SKIPPED.match(expression, end)       # always matches, maybe empty
            start = skipped.end() if skipped else end
            if not expression.startswith(token, start):
                return tokens[:index]
            token = tokens[index] = Token(token.type, str(token), start_pos=start, end_pos=start + len(token))
        end = token.end_pos if token.end_pos is not None else end
    return tokens


def _rewrite_not_in(expression: str, tokens: list[Token]) -> tuple[str, frozenset[int]]:
    """Turn each ``a not in b`` into ``a     in b`` and return where those ``in`` tokens end.

    The ``not`` becomes spaces, so every offset in the text stays that of the original expression and
    the parser applies the normal precedence of ``in``; the compiler negates the ``in`` nodes whose
    operator ends at one of the returned offsets. ``tokens`` come from celpy's own lexer, so ``not in``
    inside a string literal or a comment is left alone. Only a ``not`` that follows the end of an
    operand is rewritten: in ``x.not in y`` it is a member name, and a leading ``not in y`` stays as
    written (and fails as the unknown field ``not``).
    """
    text, ends = expression, set()
    for i in range(1, len(tokens) - 1):
        before, token, following = tokens[i - 1], tokens[i], tokens[i + 1]
        if (token.type == "IDENT" and token == "not" and following.type == "IN"
                and before.type in _OPERAND_ENDS):
            start, end = token.start_pos, token.end_pos
            assert start is not None and end is not None and following.end_pos is not None
            text = text[:start] + " " * (end - start) + text[end:]
            ends.add(following.end_pos)
    return text, frozenset(ends)


def _restore_bool_positions(tree: Tree[Token], tokens: list[Token]) -> None:
    """Give the tree's ``true``/``false`` tokens the positions ``_lex`` restored.

    Without them an error about such a literal, or about an expression that starts with one, would have
    no position. The tree's tokens are in text order, as are the lexer's; when the counts agree, the
    tree's are replaced by the lexer's.
    """
    lexed = [token for token in tokens if token.type == "BOOL_LIT" and token.start_pos is not None]
    holders: list[tuple[list[Tree[Token] | Token], int]] = []
    stack: list[Tree[Token]] = [tree]
    while stack:                                  # depth-first, left to right
        node = stack.pop()
        for index, child in enumerate(node.children):
            if isinstance(child, Token) and child.type == "BOOL_LIT" and child.start_pos is None:
                holders.append((node.children, index))
        stack.extend(reversed([child for child in node.children if isinstance(child, Tree)]))
    if holders and len(holders) == len(lexed):
        for (children, index), token in zip(holders, lexed, strict=True):
            children[index] = token


log = logging.getLogger(__name__)


def tables_path(directory: Path = Path(__file__).parent / "__pycache__") -> Path:
    """Where the lark parser's tables are kept: beside this module's bytecode, named after everything the
    tables depend on (celpy's grammar and the options its parser module gives lark, lark, Python), so
    tables of another version are never read."""
    celpy_dir = Path(celparser.__file__).parent
    sources = (celpy_dir / "cel.lark").read_bytes() + (celpy_dir / "celparser.py").read_bytes()
    key = hashlib.sha256(sources + f"{lark.__version__} {sys.implementation.cache_tag}".encode()).hexdigest()
    return directory / f"cel-lark.{sys.implementation.cache_tag}.{key[:16]}.pickle"


def cel_parser(tables: Path | None = None) -> CELParser:
    """celpy's parser, its lark tables read from ``tables`` when they are there, else built and written there.

    celpy keeps one lark parser per process and builds it in the first ``CELParser()``: about 90 ms of LALR
    analysis, a tenth of a worker's start. Read back (``Lark.load``) it takes 5 ms. The file is written as
    Python writes bytecode (not under ``PYTHONDONTWRITEBYTECODE``; atomically; failures ignored) in the
    package's own ``__pycache__``: as trusted as the bytecode beside it, which is why it may be a pickle."""
    tables = tables_path() if tables is None else tables
    if CELParser.CEL_PARSER is None:
        with contextlib.suppress(OSError), tables.open("rb") as source:
            try:
                CELParser.CEL_PARSER = Lark.load(source)
            except Exception:   # a torn or foreign file: build the tables instead
                log.warning("unreadable CEL parser tables, building them", extra={"path": str(tables)})
        if CELParser.CEL_PARSER is None:
            parser = CELParser()
            if not sys.dont_write_bytecode:
                _write_tables(parser, tables)
            return parser
    return CELParser()


def _write_tables(parser: CELParser, tables: Path) -> None:
    built = CELParser.CEL_PARSER
    assert built is not None
    with contextlib.suppress(OSError):
        tables.parent.mkdir(exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=tables.parent, prefix=tables.name, suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as target:
                built.save(target)
            os.chmod(temporary, Path(__file__).stat().st_mode & 0o666)   # as Python's bytecode files
            os.replace(temporary, tables)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(temporary)


# Built (or read) here, at import, to keep it off the first filtered request. Safe under gunicorn: without
# preload_app the worker imports this module after the fork, and the parser is plain Python objects.
_PARSER = cel_parser()


def _parse(text: str, original: str) -> Tree[Token]:
    try:
        tree: Tree[Token] = _PARSER.parse(text)
        return tree
    except CELParseError as exc:
        cause = exc.__context__
        position = _error_position(original, exc.line, exc.column, cause)
        where = f" at position {position}" if position is not None else ""
        raise ProblemError("FLT002", detail=f"Syntax error{where}: {_describe(cause)}.",
                           extra={"position": position}) from None
    except LarkError:
        raise ProblemError("FLT002", detail="Syntax error.", extra={"position": None}) from None


def _error_position(text: str, line: int | None, column: int | None,
                    cause: BaseException | None) -> int | None:
    if isinstance(cause, UnexpectedToken) and cause.token.type == "$END":
        return len(text)
    if not line or not column or line < 1 or column < 1:
        return None
    offset = 0
    for _ in range(line - 1):       # lark counts lines by "\n"
        newline = text.find("\n", offset)
        if newline < 0:
            return None
        offset = newline + 1
    return min(offset + column - 1, len(text))


def _describe(cause: BaseException | None) -> str:
    if isinstance(cause, UnexpectedToken):
        if cause.token.type == "$END":
            return "unexpected end of the expression"
        return f"unexpected {str(cause.token)!r}"
    if isinstance(cause, UnexpectedCharacters):
        return f"unexpected character {cause.char!r}"
    if isinstance(cause, UnexpectedInput):
        return "unexpected input"
    return "the expression does not parse"
