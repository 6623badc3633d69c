"""The ``filter`` parameter: CEL compiled to closures (app.query.filter), operator by operator, and every
error code with its position."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.errors import ProblemError
from app.query.cel_compile import MAX_NESTING
from app.query.filter import MAX_FILTER_LENGTH, compile_filter, filter_cache_stats
from app.resources import ResourceKind

K = ResourceKind
TASK: Mapping[str, str | int] = {
    "id": "t1", "state": "running", "desired_state": "running", "image": "nginx:1.27", "exit_code": 0,
    "error": "", "service": "web", "node": "n1", "slot": 3,
}
STACK: Mapping[str, str | int] = {"name": "shop", "services": 4, "configs": 1, "secrets": 0, "networks": 2,
                                  "volumes": 0}


def evaluate(expression: str, kind: K = K.TASK, activation: Mapping[str, str | int] | None = None) -> bool:
    result = compile_filter(expression, kind)(TASK if activation is None else activation)
    assert type(result) is bool
    return result


def problem(expression: str, kind: K = K.TASK) -> ProblemError:
    with pytest.raises(ProblemError) as caught:
        compile_filter(expression, kind)
    return caught.value


def runtime_problem(expression: str, activation: Mapping[str, str | int] = TASK) -> ProblemError:
    predicate = compile_filter(expression, K.TASK)
    with pytest.raises(ProblemError) as caught:
        predicate(activation)
    assert caught.value.code == "FLT003"
    return caught.value


# --------------------------------------------------------------------------- operators
@pytest.mark.parametrize(("expression", "expected"), [
    # equality and ordering, fields against literals both ways round
    ('state == "running"', True), ('state != "running"', False), ('"running" == state', True),
    ("slot == 3", True), ("slot != 3", False), ("slot < 4", True), ("slot <= 3", True), ("slot > 3", False),
    ("slot >= 3", True), ("4 > slot", True), ("3 >= slot", True), ("2 < slot", True), ("3 <= slot", True),
    ('state < "s"', True), ('state >= "running"', True), ('"a" < "b"', True), ("exit_code == 0", True),
    ("slot == exit_code", False), ("state == desired_state", True), ("false < true", True),
    ("1.5 < 2.5", True), ("2.0 == 2.0", True), ("1u < 2u", True), ("null == null", True),
    ("(slot > 1) == true", True), ("(slot > 1) != (slot > 5)", True),
    # logic
    ('state == "running" && slot > 1', True), ('state == "running" && slot > 3', False),
    ('state == "x" || slot == 3', True), ('state == "x" || slot == 4', False), ("!(slot == 3)", False),
    ("!!true", True), ("true && !false", True),
    # conditional
    ('slot > 1 ? state == "running" : false', True), ('slot > 5 ? true : state == "x"', False),
    ('(slot > 1 ? "big" : "small") == "big"', True),
    # in / not in
    ('state in ["running", "failed"]', True), ('state in ["failed"]', False), ("slot in [1, 2, 3]", True),
    ('state not in ["failed"]', True), ('state not in ["running"]', False), ("slot not in [3]", False),
    ("3 in [slot]", True), ('"x" in []', False), ("[1] in [[1], [2]]", True), ("[] in [[1]]", False),
    ("1u in [1u, 2u]", True), ("true in [false]", False), ("1.5 in [1.5]", True),
    # arithmetic on int (CEL int64: truncating division, remainder with the dividend's sign)
    ("slot + 1 == 4", True), ("slot - 5 == -2", True), ("slot * 3 == 9", True), ("slot / 2 == 1", True),
    ("-7 / 2 == -3", True), ("7 / -2 == -3", True), ("-7 % 2 == -1", True), ("7 % -2 == 1", True),
    ("slot % 2 == 1", True), ("-slot == -3", True), ("- -slot == 3", True), ("slot-1 == 2", True),
    ("9223372036854775807 + 0 == 9223372036854775807", True), ("-9223372036854775808 < 0", True),
    ("0x10 == 16", True), ("-0x10 == -16", True),
    # uint and double
    ("1u + 2u == 3u", True), ("7u / 2u == 3u", True), ("7u % 4u == 3u", True), ("0x10u == 16u", True),
    ("1.5 + 1.5 == 3.0", True), ("-1.5 * 2.0 == -3.0", True), ("1.0 / 4.0 == 0.25", True),
    ("-(2.5) == -2.5", True), ("1.0 / 0.0 > 1e308", True), ("-1.0 / 0.0 < 0.0", True),
    ("0.0 / 0.0 != 0.0 / 0.0", True),
    # strings
    ('state + "!" == "running!"', True), ('state.contains("unn")', True), ('state.contains("x")', False),
    ('state.startsWith("run")', True), ('state.endsWith("ing")', True), ('image.startsWith("redis")', False),
    ('(state + "x").contains("gx")', True), ('"abc".contains(state)', False), ('error.contains("")', True),
    ('image.matches("^ng.*:1\\\\.27$")', True), ('image.matches("redis")', False), ('matches(state, "^r")', True),
    (r'image.matches(r"\d+\.\d+")', True), ('image.matches("(?i)NGINX")', True),
    ('size(state) == 7', True), ("state.size() == 7", True), ('size("héllo") == 5', True),
    ("size([1, 2]) == 2", True), ("size([]) == 0", True), ("[1, 2, 3].size() == 3", True),
    # literals: escapes, quotes, raw and triple-quoted strings
    (r'"\x41\101\u0041\U00000041" == "AAAA"', True), (r'"a\tb" == "a	b"', True), ("'q' == \"q\"", True),
    (r'r"\d" == "\\d"', True), ('"""tri""" == "tri"', True), ("'''a\"b''' == 'a\"b'", True),
    (r'"\\q" == r"\q"', True), ('"é" == "\\u00e9"', True),
    # lists, indexing, conversions
    ("[1, 2] == [1, 2]", True), ("[1, 2] != [2, 1]", True), ("[] == []", True), ("[1] + [2] == [1, 2]", True),
    ('["a", "b", "c", "d"][slot] == "d"', True), ("[1, 2][0u] == 1", True), ("[[1], [2]][1] == [2]", True),
    ('int("12") + slot == 15', True), ('int("-3") == -3', True), ('int("+4") == 4', True),
    ("int(2.9) == 2", True), ("int(-2.9) == -2", True), ("int(5u) == 5", True), ("int(slot) == 3", True),
    ('string(slot) == "3"', True), ('string(5u) == "5"', True), ("string(state) == state", True),
    # comments and whitespace
    ("slot == 3 // a comment", True), ("slot\n==\n3", True),
])
def test_operator_behaviour(expression: str, expected: bool) -> None:
    assert evaluate(expression) is expected


@pytest.mark.parametrize(("expression", "expected"), [
    ("services > 3 && configs == 1", True), ("services + configs + secrets == 5", True),
    ('name.startsWith("sh") && volumes == 0', True), ("networks * 2 == services", True),
])
def test_stack_fields_are_ints(expression: str, expected: bool) -> None:
    assert evaluate(expression, K.STACK, STACK) is expected


def test_fields_are_read_from_each_activation() -> None:
    predicate = compile_filter('state == "failed" && exit_code != 0', K.TASK)
    items = [dict(TASK, state=state, exit_code=code) for state in ("running", "failed") for code in (0, 137)]
    assert [predicate(item) for item in items] == [False, False, False, True]


# --------------------------------------------------------------------------- runtime errors (FLT003)
@pytest.mark.parametrize(("expression", "detail", "position"), [
    ("slot / 0 == 1", "division by zero", 5), ("slot % (slot - 3) == 1", "modulus by zero", 5),
    ("slot * 9223372036854775807 > 0", "overflow", 5), ("9223372036854775807 + slot > 0", "overflow", 20),
    ("-9223372036854775808 - slot < 0", "overflow", 21), ("-9223372036854775808 / -1 == 0", "overflow", 21),
    ("-(-9223372036854775807 - 1) > 0", "overflow", 0), ("0u - 1u == 0u", "overflow", 3),
    ("18446744073709551615u + 1u > 0u", "overflow", 22), ("1u / 0u == 1u", "division by zero", 3),
    ('["a"][slot] == "a"', "out of range", 6), ("[1][-1] == 1", "out of range", 4),
    ("int(state) == 1", "cannot convert", 0), ('int(" 7") == 7', "cannot convert", 0),
    ('int("0x10") == 16', "cannot convert", 0), ("int(1e19) == 1", "overflow", 0),
    ("int(18446744073709551615u) == 1", "overflow", 0), ("int(1.0 / 0.0) == 1", "non-finite", 0),
    ("image.matches(error)", "invalid regular expression", 6),
])
def test_evaluation_errors_are_flt003(expression: str, detail: str, position: int) -> None:
    error = runtime_problem(expression, dict(TASK, error="("))
    assert detail in error.detail
    assert error.extra["position"] == position


@pytest.mark.parametrize(("expression", "expected"), [
    # CEL's && and || are commutative over errors: a definite answer from either side wins
    ("slot / 0 == 1 || true", True), ("true || slot / 0 == 1", True),
    ("slot / 0 == 1 && false", False), ("false && slot / 0 == 1", False),
    ('slot / 0 == 1 || state == "running"', True), ('slot / 0 == 1 && state == "x"', False),
    # ?: only evaluates the branch it picks
    ("true ? true : slot / 0 == 1", True), ("false ? slot / 0 == 1 : true", True),
])
def test_errors_are_absorbed_like_cel(expression: str, expected: bool) -> None:
    assert evaluate(expression) is expected


@pytest.mark.parametrize("expression", [
    "slot / 0 == 1 || false", "false || slot / 0 == 1", "slot / 0 == 1 && true", "true && slot / 0 == 1",
    "slot / 0 == 1 || slot % 0 == 1", "slot / 0 == 1 ? true : false", "!(slot / 0 == 1)",
    "slot in [slot / 0, 3]", "[1, 2][2] == 3 || [1][1] == 1",
])
def test_errors_that_decide_the_result_fail_the_item(expression: str) -> None:
    runtime_problem(expression)


def test_int_of_a_huge_digit_string_is_an_evaluation_error() -> None:
    assert "overflow" in runtime_problem("int(error) > 0", dict(TASK, error="9" * 5000)).detail
    assert evaluate("int(error) == 7", activation=dict(TASK, error="0" * 5000 + "7")) is True


def test_constant_operands_simplify_without_changing_the_result() -> None:
    assert evaluate('true && state == "running"') is True
    assert evaluate('state == "x" || true') is True
    assert evaluate("false ? slot / 0 == 1 : slot == 3") is True
    runtime_problem("true && slot / 0 == 1")
    runtime_problem("slot / 0 == 1 || false")


def test_an_error_on_one_item_does_not_poison_the_predicate() -> None:
    predicate = compile_filter("10 / slot > 2", K.TASK)
    assert predicate(dict(TASK, slot=3)) is True
    with pytest.raises(ProblemError):
        predicate(dict(TASK, slot=0))
    assert predicate(dict(TASK, slot=5)) is False


# --------------------------------------------------------------------------- syntax errors (FLT002)
@pytest.mark.parametrize(("expression", "position"), [
    ("state == ", 9), ('state == "x', 9), ("state = 1", 6), ("(slot > 1", 9), ("slot > 1 @ 2", 9),
    ("slot >> 1", 6), ("", 0), ("slot > 1 &&\n  state ==== 1", 22), ("a.b(", 4), ("1 +", 3),
    ("slot > 1 )", 9), ('state not in ["a"] &&', 21),
])
def test_syntax_errors_report_the_offset(expression: str, position: int) -> None:
    error = problem(expression)
    assert error.code == "FLT002"
    assert error.extra["position"] == position
    assert "Syntax error" in error.detail


# --------------------------------------------------------------------------- static type errors (FLT002)
@pytest.mark.parametrize(("expression", "kind", "position", "detail"), [
    ('slot == "x"', K.TASK, 5, "cannot compare int with string"),
    ('"x" != slot', K.TASK, 4, "cannot compare string with int"),
    ("name > 3", K.SERVICE, 5, "cannot compare string with int"),
    ("services < \"a\"", K.STACK, 9, "cannot compare int with string"),
    ("state.contains(1)", K.TASK, 6, "contains()"), ('slot.startsWith("a")', K.TASK, 5, "startsWith()"),
    ("slot == 1.0", K.TASK, 5, "int with double"), ("1u == 1", K.TASK, 3, "uint with int"),
    ("true == 1", K.TASK, 5, "bool with int"), ("state == null", K.TASK, 6, "string with null"),
    ("state in [1, 2]", K.TASK, 6, "cannot look for string in list(int)"),
    ('slot in ["a"]', K.TASK, 5, "cannot look for int"), ('state in "running"', K.TASK, 6, "needs a list"),
    ('slot in [1, "a"]', K.TASK, 12, "list elements must have one type"),
    ("!state", K.TASK, 0, "'!' needs a bool"), ("-state == 1", K.TASK, 0, "unary '-'"),
    ("-1u == 1u", K.TASK, 0, "out of the 64-bit range"), ("-(1u) == 1u", K.TASK, 0, "unary '-'"),
    ("state + 1 == 2", K.TASK, 6, "no operator '+' for string and int"),
    ('state - "a" == ""', K.TASK, 6, "no operator '-' for string"), ("1.5 % 2.0 == 1.0", K.TASK, 4, "'%'"),
    ("slot && true", K.TASK, 0, "'&&' needs bool operands"), ("true || state", K.TASK, 0, "'||'"),
    ("state ? true : false", K.TASK, 0, "condition of ?:"), ('true ? 1 : "a"', K.TASK, 0, "branches of ?:"),
    ("size(slot) == 1", K.TASK, 0, "size()"), ("slot.size() == 1", K.TASK, 5, "size()"),
    ("[1] < [2]", K.TASK, 4, "'<' is not defined for list(int)"), ("null < null", K.TASK, 5, "'<'"),
    ('state[0] == "r"', K.TASK, 6, "indexing is only defined for lists"), ('[1]["a"] == 1', K.TASK, 4, "index"),
    ("[][0] == 1", K.TASK, 3, "empty list"), ("int(true) == 1", K.TASK, 0, "int() is not supported for bool"),
    ("string(1.5) == \"1.5\"", K.TASK, 0, "string() is not supported"),
    ("size(state, 1) == 1", K.TASK, 0, "takes 1 argument"), ('state.contains() ', K.TASK, 6, "takes 1"),
    ("9223372036854775808 > slot", K.TASK, 0, "out of the 64-bit range"),
    ("18446744073709551616u > 1u", K.TASK, 0, "out of the 64-bit range"),
    ('state.matches("(")', K.TASK, 14, "invalid regular expression"),
    (r'"\800" == "x"', K.TASK, 1, "invalid escape"), ("slot > 1 && (true || 1)", K.TASK, 13, "'||'"),
    ("slot > 1 && true == 1", K.TASK, 17, "bool with int"), ("false ? 1 : 2u", K.TASK, 0, "branches"),
])
def test_static_type_errors_are_flt002_with_position(expression: str, kind: K, position: int,
                                                     detail: str) -> None:
    error = problem(expression, kind)
    assert (error.code, error.extra["position"]) == ("FLT002", position)
    assert detail in error.detail


@pytest.mark.parametrize(("expression", "detail"), [
    ("has(state)", "macro 'has'"), ("dyn(slot) == 1", "macro 'dyn'"), ("[1, 2].all(x, x > 0)", "macro 'all'"),
    ("[1].exists(x, x == 1)", "macro 'exists'"), ("state.foo == 1", "field selection"),
    ('{"a": 1}["a"] == 1', "map literals"), ('b"abc" == b"abc"', "bytes"), (".state == \"x\"", "qualified"),
    ("Foo{a: 1} == 1", "message construction"), ('timestamp("2024-01-01T00:00:00Z") > 1', "timestamp()"),
    ("type(slot) == int", "type()"), ("double(slot) > 1.0", "double()"),
    ("state.lowerAscii() == \"r\"", "lowerAscii()"),
    ("foo(1)", "foo()"),
])
def test_unsupported_constructs_are_flt002(expression: str, detail: str) -> None:
    error = problem(expression)
    assert error.code == "FLT002" and detail in error.detail


def test_deep_nesting_is_refused_before_python_recursion_limits() -> None:
    nested = "!" * (MAX_NESTING + 5) + "(slot > 1)"
    assert len(nested) <= MAX_FILTER_LENGTH
    error = problem(nested)
    assert error.code == "FLT002" and "levels deep" in error.detail
    assert evaluate("(" * 200 + "slot" + ")" * 200 + " > 1") is True     # parentheses cost nothing
    assert evaluate("!" * 100 + "(slot > 1)") is True


# --------------------------------------------------------------------------- unknown field (FLT004)
@pytest.mark.parametrize(("expression", "kind", "position", "field"), [
    ('nme == "x"', K.TASK, 0, "nme"), ('slot > 1 && nme == "x"', K.TASK, 12, "nme"),
    ("services > 1", K.TASK, 0, "services"), ("slot > 1", K.STACK, 0, "slot"),
    ('state not in [foo]', K.TASK, 14, "foo"), ("task.state == 1", K.TASK, 0, "task"),
    ("size(x) == 1", K.TASK, 5, "x"), ("[1, y][0] == 1", K.TASK, 4, "y"),
    ("not in [1]", K.TASK, 0, "not"), ("slot > 1 && not in [1]", K.TASK, 12, "not"),
])
def test_unknown_fields_are_flt004_with_name_and_position(expression: str, kind: K, position: int,
                                                          field: str) -> None:
    error = problem(expression, kind)
    assert error.code == "FLT004"
    assert error.extra == {"position": position, "field": field}
    assert field in error.detail


# --------------------------------------------------------------------------- non-boolean (FLT005)
@pytest.mark.parametrize(("expression", "type_name"), [
    ("slot", "int"), ("slot + 1", "int"), ("state", "string"), ('"x"', "string"), ("1.5", "double"),
    ("[true]", "list(bool)"), ("null", "null"), ("1u", "uint"), ('slot > 1 ? "a" : "b"', "string"),
])
def test_non_boolean_results_are_flt005(expression: str, type_name: str) -> None:
    error = problem(expression)
    assert error.code == "FLT005"
    assert type_name in error.detail


# --------------------------------------------------------------------------- length (FLT001)
def test_512_characters_are_accepted_and_513_are_not() -> None:
    prefix, suffix = 'state != "', '"'
    at_limit = prefix + "a" * (MAX_FILTER_LENGTH - len(prefix) - len(suffix)) + suffix
    assert len(at_limit) == 512 == MAX_FILTER_LENGTH
    assert evaluate(at_limit) is True
    too_long = at_limit[:-1] + "a" + suffix
    assert len(too_long) == 513
    error = problem(too_long)
    assert error.code == "FLT001" and error.status == 400
    assert "513" in error.detail


# --------------------------------------------------------------------------- `not in`
@pytest.mark.parametrize(("expression", "expected"), [
    ('state not in ["a"] && slot == 3', True), ('state not in ["a"] && slot == 4', False),
    ('slot == 4 || state not in ["running"]', False), ('state not in ["running"] || slot == 3', True),
    ('!(state not in ["running"])', True), ('state not   in ["a"]', True), ('state not\nin ["a"]', True),
    ("slot + 1 not in [4]", False), ("slot not in [1, 2] ? true : false", True),
    ('(state) not in ["x"] && (slot) not in [0]', True), ("[slot] not in [[3]]", False),
    ('"not in" == "not" + " in"', True), ('"x not in y".contains("not in")', True),
    ("slot == 3 // state not in everything", True), ("r'not in' != 'n'", True),
])
def test_not_in_means_negated_in(expression: str, expected: bool) -> None:
    assert evaluate(expression) is expected


def test_not_in_keeps_string_literals_untouched() -> None:
    assert evaluate('error == "x not in y"', activation=dict(TASK, error="x not in y")) is True
    assert evaluate('error == "x not in y"', activation=dict(TASK, error="x      in y")) is False


def test_positions_after_a_not_in_rewrite_are_those_of_the_original() -> None:
    error = problem('state not in [1] && slot == 3')
    assert (error.code, error.extra["position"]) == ("FLT002", 10)      # the `in` after `not`
    error = problem('slot not in [1] && nope == 3')
    assert (error.code, error.extra["position"]) == ("FLT004", 19)
    error = problem('slot not in [1] && slot === 3')
    assert (error.code, error.extra["position"]) == ("FLT002", 26)


def test_not_as_a_member_name_is_not_rewritten() -> None:
    assert "field selection '.not'" in problem('state.not in ["a"]').detail


# --------------------------------------------------------------------------- cache
def test_compiled_predicates_are_cached_by_text_and_kind() -> None:
    first = compile_filter("slot > 1 && state != 'x'", K.TASK)
    assert compile_filter("slot > 1 && state != 'x'", K.TASK) is first
    assert compile_filter("slot > 1 && state != 'x' ", K.TASK) is not first
    assert compile_filter('name == "x"', K.SERVICE) is not compile_filter('name == "x"', K.CONFIG)
    assert filter_cache_stats().max_entries == 256


def test_failed_compilations_are_not_cached_as_predicates() -> None:
    for _ in range(2):
        assert problem("slot ==").code == "FLT002"


# --------------------------------------------------------------------------- robustness
_TOKENS = ("slot", "state", "exit_code", "nope", "1", "0", "-1", "2u", "1.5", '"a"', "'b'", "true", "null",
           "(", ")", "[", "]", ",", ".", "!", "-", "+", "*", "/", "%", "==", "!=", "<", ">=", "&&", "||",
           "?", ":", "in", "not", "size", "contains", "matches", "int", "string", "{", "}", "@", '"')


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(_TOKENS), max_size=12), st.integers(-3, 3), st.sampled_from(["running", ""]))
def test_any_input_compiles_or_fails_with_a_problem(tokens: list[str], slot: int, state: str) -> None:
    """Whatever the text, compiling raises only ProblemError and a predicate returns a bool or FLT003."""
    try:
        predicate = compile_filter(" ".join(tokens), K.TASK)
    except ProblemError as error:
        assert error.code in {"FLT002", "FLT004", "FLT005"}
        return
    try:
        assert type(predicate(dict(TASK, slot=slot, state=state))) is bool
    except ProblemError as error:
        assert error.code == "FLT003"
