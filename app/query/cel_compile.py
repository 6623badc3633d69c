"""Type-check a celpy (lark) parse tree against a kind's field table and compile it into closures.

The public entry point and the description of the supported language are in ``app.query.filter``; this
module is the machinery behind it. ``compile_tree`` walks the tree once, infers a static type for every
node (CEL has no implicit conversions, so operand types must agree), and builds one nested closure per
node that reads plain ``str``/``int`` values from the activation dict. Sub-expressions that do not read
the activation are evaluated once here (constant folding) unless they fail, in which case they keep
failing per item, as CEL's error semantics require.

Runtime representation of CEL values: bool → ``bool``, int and uint → ``int`` (told apart statically),
double → ``float``, string → ``str``, null → ``None``, list → ``tuple``.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, NoReturn

import re2
from lark import Token, Tree

from app.errors import ProblemError
from app.query import regex_cache
from app.query.cel_literals import EscapeError, decode_string, parse_int_literal
from app.resources import FieldType

Activation = Mapping[str, str | int]
Eval = Callable[[Activation], Any]

INT_MIN, INT_MAX = -(2**63), 2**63 - 1
UINT_MAX = 2**64 - 1


@dataclass(frozen=True, slots=True)
class CelType:
    name: str                         # bool, int, uint, double, string, null or list
    elem: CelType | None = None       # element type of a list; None for the empty list literal

    def __str__(self) -> str:
        return f"list({self.elem or 'dyn'})" if self.name == "list" else self.name


BOOL, INT, UINT, DOUBLE, STRING, NULL = (CelType(n) for n in ("bool", "int", "uint", "double", "string",
                                                              "null"))
_FIELD_TYPES = MappingProxyType({FieldType.STRING: STRING, FieldType.INT: INT})
_ORDERED = frozenset({"bool", "int", "uint", "double", "string"})
_HASHABLE = frozenset({"bool", "int", "uint", "string", "null"})
_EMPTY: Activation = MappingProxyType({})


def unify(a: CelType, b: CelType) -> CelType | None:
    """The common type of ``a`` and ``b`` (the empty list fits any list), or None when they differ."""
    if a == b:
        return a
    if a.name == "list" and b.name == "list":
        if a.elem is None or b.elem is None:
            return a if b.elem is None else b
        elem = unify(a.elem, b.elem)
        return CelType("list", elem) if elem is not None else None
    return None


@dataclass(frozen=True, slots=True)
class Node:
    fn: Eval
    type: CelType
    fails: bool = False               # evaluation may raise FLT003
    const: bool = False               # does not read the activation
    value: Any = None                 # the value of a const node that does not fail
    field: str | None = None          # a bare field reference


class Failure(Exception):
    """Raised by the operator implementations below; the node turns it into FLT003 with a position."""


def type_error(detail: str, position: int | None) -> NoReturn:
    raise ProblemError("FLT002", detail=detail, extra={"position": position})


def _guard(impl: Callable[..., Any], fns: Sequence[Eval], position: int | None) -> Eval:
    """Apply ``impl`` to the operands' values; a ``Failure`` becomes FLT003 at ``position``."""
    def raise_failure(exc: Failure) -> NoReturn:
        code = "FLT006" if isinstance(exc, TooCostly) else "FLT003"
        raise ProblemError(code, detail=f"{exc} (at position {position})",
                           extra={"position": position}) from None

    if len(fns) == 1:
        (f,) = fns

        def unary(a: Activation) -> Any:
            try:
                return impl(f(a))
            except Failure as exc:
                raise_failure(exc)
        return unary
    lf, rf = fns

    def binary(a: Activation) -> Any:
        try:
            return impl(lf(a), rf(a))
        except Failure as exc:
            raise_failure(exc)
    return binary


# ----------------------------------------------------------------------------- operator implementations
def _int(value: int) -> int:
    if INT_MIN <= value <= INT_MAX:
        return value
    raise Failure("integer overflow")


def _uint(value: int) -> int:
    if 0 <= value <= UINT_MAX:
        return value
    raise Failure("unsigned integer overflow")


def _int_div(x: int, y: int) -> int:
    if y == 0:
        raise Failure("division by zero")
    quotient = abs(x) // abs(y)               # CEL truncates toward zero
    return _int(-quotient if (x < 0) != (y < 0) else quotient)


def _int_mod(x: int, y: int) -> int:
    if y == 0:
        raise Failure("modulus by zero")
    remainder = abs(x) % abs(y)               # sign follows the dividend
    return -remainder if x < 0 else remainder


def _uint_div(x: int, y: int) -> int:
    if y == 0:
        raise Failure("division by zero")
    return x // y


def _uint_mod(x: int, y: int) -> int:
    if y == 0:
        raise Failure("modulus by zero")
    return x % y


def _double_div(x: float, y: float) -> float:
    if y == 0.0:                              # IEEE 754, as CEL specifies
        if x == 0.0 or math.isnan(x):
            return math.nan
        return math.copysign(math.inf, x) * math.copysign(1.0, y)
    return x / y


_ARITH: Mapping[tuple[str, str], tuple[Callable[[Any, Any], Any], bool]] = MappingProxyType({
    ("+", "int"): (lambda x, y: _int(x + y), True),
    ("-", "int"): (lambda x, y: _int(x - y), True),
    ("*", "int"): (lambda x, y: _int(x * y), True),
    ("/", "int"): (_int_div, True),
    ("%", "int"): (_int_mod, True),
    ("+", "uint"): (lambda x, y: _uint(x + y), True),
    ("-", "uint"): (lambda x, y: _uint(x - y), True),
    ("*", "uint"): (lambda x, y: _uint(x * y), True),
    ("/", "uint"): (_uint_div, True),
    ("%", "uint"): (_uint_mod, True),
    ("+", "double"): (operator.add, False),
    ("-", "double"): (operator.sub, False),
    ("*", "double"): (operator.mul, False),
    ("/", "double"): (_double_div, False),
    ("+", "string"): (operator.add, False),
    ("+", "list"): (operator.add, False),
})

_COMPARE: Mapping[str, Callable[[Any, Any], bool]] = MappingProxyType({
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt,
    ">=": operator.ge,
})
_FLIPPED = MappingProxyType({"==": "==", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="})


def _field_vs_const(op: str, name: str, v: Any) -> Eval:
    """The hot path: ``field <op> constant`` as one closure with one dict lookup and no extra call."""
    if op == "==":
        return lambda a: a[name] == v
    if op == "!=":
        return lambda a: a[name] != v
    if op == "<":
        return lambda a: a[name] < v
    if op == "<=":
        return lambda a: a[name] <= v
    if op == ">":
        return lambda a: a[name] > v
    return lambda a: a[name] >= v


def _field_string_method(method: str, name: str, needle: str) -> Eval:
    """``field.contains("x")`` and friends as one closure."""
    def contains(a: Mapping[str, Any]) -> bool:
        return needle in a[name]

    def starts_with(a: Mapping[str, Any]) -> bool:
        return str.startswith(a[name], needle)

    def ends_with(a: Mapping[str, Any]) -> bool:
        return str.endswith(a[name], needle)

    return {"contains": contains, "startsWith": starts_with}.get(method, ends_with)


_INT_TEXT = re.compile(r"[+-]?[0-9]+")


def _string_to_int(text: str) -> int:
    if _INT_TEXT.fullmatch(text) is None:
        raise Failure(f"cannot convert {text[:40]!r} to int")
    digits = text.lstrip("+-").lstrip("0") or "0"
    if len(digits) > 19:                      # beyond int64; Python also refuses 4300+ digit strings
        raise Failure("integer overflow")
    return _int(-int(digits) if text.startswith("-") else int(digits))


def _double_to_int(value: float) -> int:
    if not math.isfinite(value):
        raise Failure("cannot convert a non-finite double to int")
    return _int(math.trunc(value))


def _uint_to_int(value: int) -> int:
    return _int(value)


class TooCostly(Failure):
    """A pattern built from a field that RE2 refuses for its size: FLT006 for the item."""


def compile_regex(pattern: str) -> tuple[Any, int]:
    """The RE2 program for ``pattern`` (from the bounded cache) and its estimated size."""
    try:
        return regex_cache.compile_regex(pattern)
    except regex_cache.RegexError as exc:
        kind = TooCostly if exc.too_costly else Failure
        raise kind(f"invalid regular expression {pattern[:40]!r}: {exc}") from None


def _matches(text: str, pattern: str) -> bool:
    regex, _ = compile_regex(pattern)
    try:
        return regex.search(text.encode("utf-8")) is not None
    except (re2.error, ValueError, TypeError) as exc:   # e.g. lone surrogates do not encode to UTF-8
        raise Failure(f"matches() failed: {exc}") from None


MATCH_MEMO_LIMIT = 4096
MEMO_BYTES = 256 * 1024
MEMO_ENTRY_OVERHEAD = 120        # dict slot, str header, bool: what one memo entry adds beyond its text


class MemoBudget:
    """The bytes the ``matches`` memos of one compiled predicate may still take (shared by its memos)."""

    __slots__ = ("remaining",)

    def __init__(self, limit: int = MEMO_BYTES) -> None:
        self.remaining = limit


def _search_with(regex: Any, memo_budget: MemoBudget) -> Callable[[str], bool]:
    """A search with a constant pattern, memoised per text (fields such as image repeat a lot).

    The re2 wrapper costs microseconds per call, mostly mapping match offsets back to ``str`` indices;
    searching the UTF-8 bytes gives the same yes/no answer (celpy's ``re2.search`` encodes the text the
    same way) for about half the cost. The memo belongs to one compiled predicate and stops growing at
    ``MATCH_MEMO_LIMIT`` texts or when the predicate's ``MemoBudget`` (``MEMO_BYTES``) is spent.
    """
    memo: dict[str, bool] = {}

    def search(text: str) -> bool:
        found = memo.get(text)
        if found is None:
            try:
                found = regex.search(text.encode("utf-8")) is not None
            except (re2.error, ValueError, TypeError) as exc:   # e.g. a lone surrogate
                raise Failure(f"matches() failed: {exc}") from None
            cost = len(text) + MEMO_ENTRY_OVERHEAD
            if len(memo) < MATCH_MEMO_LIMIT and memo_budget.remaining >= cost:
                memo_budget.remaining -= cost
                memo[text] = found
        return found
    return search


def _index(items: tuple[Any, ...], i: int) -> Any:
    if 0 <= i < len(items):
        return items[i]
    raise Failure(f"index {i} out of range for a list of size {len(items)}")


# ----------------------------------------------------------------------------- the compiler
_WRAPPERS = frozenset({"expr", "conditionalor", "conditionaland", "relation", "addition", "multiplication",
                       "unary", "member", "primary", "paren_expr"})
_SYMBOLS = MappingProxyType({
    "relation_lt": "<", "relation_le": "<=", "relation_gt": ">", "relation_ge": ">=", "relation_eq": "==",
    "relation_ne": "!=", "relation_in": "in", "addition_add": "+", "addition_sub": "-",
    "multiplication_mul": "*", "multiplication_div": "/", "multiplication_mod": "%",
})
_MACROS = frozenset({"all", "exists", "exists_one", "map", "filter", "reduce", "min", "has", "dyn"})
_STRING_METHODS = MappingProxyType({
    "contains": lambda s, sub: sub in s,
    "startsWith": str.startswith,
    "endsWith": str.endswith,
})


def position(item: Tree[Token] | Token) -> int | None:
    """Start offset of a token or subtree: the tree's own, else that of its leftmost token."""
    while isinstance(item, Tree):
        start: int | None = getattr(item.meta, "start_pos", None)
        if start is not None or not item.children:
            return start
        item = item.children[0]
    return item.start_pos


def _subtree(item: Tree[Token] | Token) -> Tree[Token]:
    if not isinstance(item, Tree):
        raise TypeError(f"unexpected token {item!r} in the parse tree")
    return item


class Compiler:
    """One compilation: the field table of the kind and where the rewritten ``not in`` operators are."""

    def __init__(self, fields: Mapping[str, FieldType], negated_in_ends: frozenset[int]) -> None:
        self._fields = fields
        self._negated_in_ends = negated_in_ends
        self.memo_budget = MemoBudget()
        self.regex_bytes = 0          # estimated size of the constant-pattern programs the closures hold
        self.memos = 0                # constant-pattern matches() memoising into ``memo_budget``

    # -- node construction ---------------------------------------------------------------------
    def _build(self, fn: Eval, type_: CelType, children: Iterable[Node], fails: bool = False) -> Node:
        """A node over ``children``; folded to a constant when it reads no field and does not fail."""
        kids = tuple(children)
        fails = fails or any(k.fails for k in kids)
        if all(k.const for k in kids):
            try:
                value = fn(_EMPTY)
            except ProblemError:
                return Node(fn, type_, fails=True, const=True)
            return constant(value, type_)
        return Node(fn, type_, fails=fails)

    # -- dispatch ----------------------------------------------------------------------------
    def compile(self, tree: Tree[Token]) -> Node:
        while tree.data in _WRAPPERS and len(tree.children) == 1:   # iterative: deep nesting is cheap
            tree = _subtree(tree.children[0])
        data = str(tree.data)
        kids = tree.children
        if data == "expr":
            cond, yes, no = (self.compile(_subtree(k)) for k in kids)
            return self._conditional(cond, yes, no, position(tree))
        if data in ("conditionalor", "conditionaland"):
            left, right = (self.compile(_subtree(k)) for k in kids)
            return self._logical(data == "conditionalor", left, right, position(tree))
        if data in ("relation", "addition", "multiplication"):
            return self._binary(_subtree(kids[0]), _subtree(kids[1]))
        if data == "unary":
            return self._unary(_subtree(kids[0]), self.compile(_subtree(kids[1])))
        if data == "literal":
            return self._literal(tree)
        if data == "ident":
            return self._ident(kids[0])
        if data == "list_lit":
            return self._list(self._args(kids[0]) if kids else [], tree)
        if data == "ident_arg":
            name = kids[0]
            assert isinstance(name, Token)
            return self._function(name, self._args(kids[1]) if len(kids) > 1 else [])
        if data == "member_dot_arg":
            return self._method(tree)
        if data == "member_index":
            return self._index(self.compile(_subtree(kids[0])), self.compile(_subtree(kids[1])),
                               position(kids[1]))
        if data == "member_dot":
            self.compile(_subtree(kids[0]))             # an unknown field is reported first
            type_error(f"field selection '.{kids[1]}' is not supported", position(kids[1]))
        unsupported = {"map_lit": "map literals", "member_object": "message construction",
                       "dot_ident": "qualified names", "dot_ident_arg": "qualified names"}
        type_error(f"{unsupported.get(data, data)} are not supported in filters", position(tree))

    def _args(self, exprlist: Tree[Token] | Token) -> list[tuple[Node, int | None]]:
        return [(self.compile(_subtree(e)), position(e)) for e in _subtree(exprlist).children]

    # -- leaves --------------------------------------------------------------------------------
    def _literal(self, tree: Tree[Token]) -> Node:
        token = tree.children[0]
        assert isinstance(token, Token)
        text, kind, pos = str(token), token.type, token.start_pos
        if kind == "INT_LIT":
            value = parse_int_literal(text, INT_MIN, INT_MAX)
            if value is None:
                type_error(f"integer literal {text} is out of the 64-bit range", pos)
            return constant(value, INT)
        if kind == "UINT_LIT":
            value = parse_int_literal(text[:-1], 0, UINT_MAX)
            if value is None:
                type_error(f"unsigned literal {text} is out of the 64-bit range", pos)
            return constant(value, UINT)
        if kind == "FLOAT_LIT":
            return constant(float(text), DOUBLE)
        if kind in ("STRING_LIT", "MLSTRING_LIT"):
            try:
                return constant(decode_string(text), STRING)
            except EscapeError as exc:
                at = None if pos is None else pos + exc.offset
                type_error(f"invalid escape sequence in string literal: {exc}", at)
        if kind == "BOOL_LIT":
            return constant(text == "true", BOOL)
        if kind == "NULL_LIT":
            return constant(None, NULL)
        type_error("bytes literals are not supported in filters", pos)

    def _ident(self, token: Tree[Token] | Token) -> Node:
        assert isinstance(token, Token)
        name = str(token)
        field_type = self._fields.get(name)
        if field_type is None:
            known = ", ".join(sorted(self._fields))
            raise ProblemError("FLT004", detail=f"unknown field '{name}'; this kind has: {known}",
                               extra={"position": token.start_pos, "field": name})
        return Node(operator.itemgetter(name), _FIELD_TYPES[field_type], field=name)

    def _list(self, items: list[tuple[Node, int | None]], tree: Tree[Token]) -> Node:
        elem: CelType | None = None
        for node, pos in items:
            common = node.type if elem is None else unify(elem, node.type)
            if common is None:
                type_error(f"list elements must have one type, found {elem} and {node.type}", pos)
            elem = common
        fns = [node for node, _ in items]
        getters = tuple(n.fn for n in fns)
        return self._build(lambda a: tuple([g(a) for g in getters]), CelType("list", elem), fns)

    # -- operators -----------------------------------------------------------------------------
    def _conditional(self, cond: Node, yes: Node, no: Node, pos: int | None) -> Node:
        if cond.type != BOOL:
            type_error(f"the condition of ?: must be bool, not {cond.type}", pos)
        common = unify(yes.type, no.type)
        if common is None:
            type_error(f"the branches of ?: have different types, {yes.type} and {no.type}", pos)
        if cond.const and not cond.fails:    # only the chosen branch is ever evaluated
            return dataclasses.replace(yes if cond.value else no, type=common)
        cf, yf, nf = cond.fn, yes.fn, no.fn
        return self._build(lambda a: yf(a) if cf(a) else nf(a), common, (cond, yes, no))

    def _logical(self, is_or: bool, left: Node, right: Node, pos: int | None) -> Node:
        symbol = "||" if is_or else "&&"
        for side in (left, right):
            if side.type != BOOL:
                type_error(f"'{symbol}' needs bool operands, not {side.type}", pos)
        # A constant side decides or drops out, exactly under CEL's rules (x && false is false even
        # when x fails; x && true is x).
        for known, other in ((left, right), (right, left)):
            if known.const and not known.fails:
                return known if known.value == is_or else other
        lf, rf = left.fn, right.fn
        fn: Eval
        if not left.fails:                   # plain short-circuit already matches CEL
            fn = (lambda a: lf(a) or rf(a)) if is_or else (lambda a: lf(a) and rf(a))
        elif is_or:                          # CEL's commutative ||: error || true is true
            def fn(a: Activation) -> bool:
                try:
                    if lf(a):
                        return True
                except ProblemError:
                    if rf(a):
                        return True
                    raise
                return bool(rf(a))
        else:                                # error && false is false
            def fn(a: Activation) -> bool:
                try:
                    if not lf(a):
                        return False
                except ProblemError:
                    if not rf(a):
                        return False
                    raise
                return bool(rf(a))
        return self._build(fn, BOOL, (left, right))

    def _binary(self, op_tree: Tree[Token], right_tree: Tree[Token]) -> Node:
        symbol = _SYMBOLS[str(op_tree.data)]
        left = self.compile(_subtree(op_tree.children[0]))
        right = self.compile(right_tree)
        end = getattr(op_tree.meta, "end_pos", None)
        pos = None if end is None else end - len(symbol)
        if symbol == "in":
            negate = end in self._negated_in_ends
            return self._in(left, right, "not in" if negate else "in", negate, pos)
        if symbol in _COMPARE:
            return self._compare(symbol, left, right, pos)
        common = unify(left.type, right.type)
        entry = _ARITH.get((symbol, common.name)) if common is not None else None
        if common is None or entry is None:
            type_error(f"no operator '{symbol}' for {left.type} and {right.type}", pos)
        impl, fails = entry
        if fails:
            return self._build(_guard(impl, (left.fn, right.fn), pos), common, (left, right), True)
        lf, rf = left.fn, right.fn
        return self._build(lambda a: impl(lf(a), rf(a)), common, (left, right))

    def _compare(self, symbol: str, left: Node, right: Node, pos: int | None) -> Node:
        common = unify(left.type, right.type)
        if common is None:
            type_error(f"cannot compare {left.type} with {right.type} using '{symbol}' "
                       "(CEL has no implicit conversions)", pos)
        if symbol not in ("==", "!=") and common.name not in _ORDERED:
            type_error(f"'{symbol}' is not defined for {common}", pos)
        if left.field is not None and right.const and not right.fails:
            return Node(_field_vs_const(symbol, left.field, right.value), BOOL)
        if right.field is not None and left.const and not left.fails:
            return Node(_field_vs_const(_FLIPPED[symbol], right.field, left.value), BOOL)
        op, lf, rf = _COMPARE[symbol], left.fn, right.fn
        return self._build(lambda a: op(lf(a), rf(a)), BOOL, (left, right))

    def _in(self, item: Node, container: Node, symbol: str, negate: bool, pos: int | None) -> Node:
        if container.type.name != "list":
            type_error(f"'{symbol}' needs a list on the right, not {container.type}", pos)
        elem = container.type.elem
        if elem is not None and unify(item.type, elem) is None:
            type_error(f"cannot look for {item.type} in {container.type}", pos)
        if item.field is not None and container.const and not container.fails:
            name = item.field
            values = container.value
            pool = frozenset(values) if elem is not None and elem.name in _HASHABLE else values
            if negate:
                return Node(lambda a: a[name] not in pool, BOOL)
            return Node(lambda a: a[name] in pool, BOOL)
        lf, rf = item.fn, container.fn
        fn: Eval = (lambda a: lf(a) not in rf(a)) if negate else (lambda a: lf(a) in rf(a))
        return self._build(fn, BOOL, (item, container))

    def _unary(self, op_tree: Tree[Token], operand: Node) -> Node:
        pos = position(op_tree)
        f = operand.fn
        if op_tree.data == "unary_not":
            if operand.type != BOOL:
                type_error(f"'!' needs a bool operand, not {operand.type}", pos)
            return self._build(lambda a: not f(a), BOOL, (operand,))
        if operand.type == INT:
            return self._build(_guard(lambda x: _int(-x), (f,), pos), INT, (operand,), True)
        if operand.type == DOUBLE:
            return self._build(lambda a: -f(a), DOUBLE, (operand,))
        type_error(f"unary '-' is not defined for {operand.type}", pos)

    def _index(self, items: Node, index: Node, pos: int | None) -> Node:
        if items.type.name != "list":
            type_error(f"indexing is only defined for lists, not {items.type}", pos)
        if items.type.elem is None:
            type_error("cannot index an empty list", pos)
        if index.type not in (INT, UINT):
            type_error(f"a list index must be int, not {index.type}", pos)
        return self._build(_guard(_index, (items.fn, index.fn), pos), items.type.elem, (items, index), True)

    # -- functions and methods -----------------------------------------------------------------
    def _method(self, tree: Tree[Token]) -> Node:
        receiver_tree, name_token, *rest = tree.children
        assert isinstance(name_token, Token)
        name, pos = str(name_token), name_token.start_pos
        receiver = self.compile(_subtree(receiver_tree))
        if name in _MACROS:
            type_error(f"the macro '{name}' is not supported in filters", pos)
        args = self._args(rest[0]) if rest else []
        if name == "size":
            self._arity(name, args, 0, pos)
            return self._size(receiver, pos)
        if name == "matches":
            self._arity(name, args, 1, pos)
            return self._matches(receiver, args[0], pos)
        method = _STRING_METHODS.get(name)
        if method is None:
            type_error(f"the method '{name}()' is not supported in filters", pos)
        self._arity(name, args, 1, pos)
        arg = args[0][0]
        if receiver.type != STRING or arg.type != STRING:
            type_error(f"{name}() is defined for string.{name}(string), not {receiver.type}.{name}"
                       f"({arg.type})", pos)
        if receiver.field is not None and arg.const and not arg.fails:
            return Node(_field_string_method(name, receiver.field, arg.value), BOOL)
        rf, af = receiver.fn, arg.fn
        return self._build(lambda a: method(rf(a), af(a)), BOOL, (receiver, arg))

    def _function(self, name_token: Token, args: list[tuple[Node, int | None]]) -> Node:
        name, pos = str(name_token), name_token.start_pos
        if name in _MACROS:
            type_error(f"the macro '{name}' is not supported in filters", pos)
        if name == "matches":
            self._arity(name, args, 2, pos)
            return self._matches(args[0][0], args[1], pos)
        if name not in ("size", "int", "string"):
            type_error(f"the function '{name}()' is not supported in filters", pos)
        self._arity(name, args, 1, pos)
        arg = args[0][0]
        if name == "size":
            return self._size(arg, pos)
        if name == "string":
            if arg.type == STRING:
                return arg
            if arg.type in (INT, UINT):
                f = arg.fn
                return self._build(lambda a: str(f(a)), STRING, (arg,))
            type_error(f"string() is not supported for {arg.type}", pos)
        converters: dict[CelType, Callable[[Any], int]] = {
            UINT: _uint_to_int, DOUBLE: _double_to_int, STRING: _string_to_int}
        if arg.type == INT:
            return arg
        converter = converters.get(arg.type)
        if converter is None:
            type_error(f"int() is not supported for {arg.type}", pos)
        return self._build(_guard(converter, (arg.fn,), pos), INT, (arg,), True)

    def _size(self, arg: Node, pos: int | None) -> Node:
        if arg.type != STRING and arg.type.name != "list":
            type_error(f"size() is defined for strings and lists, not {arg.type}", pos)
        f = arg.fn
        return self._build(lambda a: len(f(a)), INT, (arg,))

    def _matches(self, text: Node, pattern_arg: tuple[Node, int | None], pos: int | None) -> Node:
        pattern, pattern_pos = pattern_arg
        if text.type != STRING or pattern.type != STRING:
            type_error(f"matches() is defined for string.matches(string), not {text.type}.matches"
                       f"({pattern.type})", pos)
        if pattern.const and not pattern.fails:
            try:
                regex, size = compile_regex(pattern.value)
            except TooCostly as exc:
                raise ProblemError("FLT006", detail=f"{exc}; RE2 refuses programs over "
                                   f"{regex_cache.RE2_MAX_MEM // 1024} KiB. Simplify the pattern, e.g. "
                                   "fewer repetitions of Unicode classes such as \\pL{n}.",
                                   extra={"position": pattern_pos}) from None
            except Failure as exc:
                type_error(str(exc), pattern_pos)
            self.regex_bytes += size
            self.memos += 1
            return self._build(_guard(_search_with(regex, self.memo_budget), (text.fn,), pos), BOOL, (text,),
                               True)
        return self._build(_guard(_matches, (text.fn, pattern.fn), pos), BOOL, (text, pattern), True)

    @staticmethod
    def _arity(name: str, args: Sequence[object], count: int, pos: int | None) -> None:
        if len(args) != count:
            plural = "" if count == 1 else "s"
            type_error(f"{name}() takes {count} argument{plural}, got {len(args)}", pos)


def constant(value: Any, type_: CelType) -> Node:
    return Node(lambda a: value, type_, const=True, value=value)


MAX_NESTING = 128


def nesting(tree: Tree[Token]) -> int:
    """How deeply operations nest (pass-through grammar levels not counted), computed without recursion.

    Compilation recurses and the compiled closures call each other once per level, so the depth is
    capped well below Python's recursion limit, whatever the caller's own stack depth.
    """
    deepest, stack = 0, [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        if not (node.data in _WRAPPERS and len(node.children) == 1):
            depth += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in node.children if isinstance(child, Tree))
    return deepest


@dataclass(frozen=True, slots=True)
class Compiled:
    node: Node
    held_bytes: int           # regex programs the closures hold plus their matches() memos at the cap


def compile_tree(tree: Tree[Token], fields: Mapping[str, FieldType], negated_in_ends: frozenset[int]) -> Compiled:
    if nesting(tree) > MAX_NESTING:
        type_error(f"the filter nests more than {MAX_NESTING} levels deep", None)
    compiler = Compiler(fields, negated_in_ends)
    node = compiler.compile(tree)
    return Compiled(node, compiler.regex_bytes + (MEMO_BYTES if compiler.memos else 0))
