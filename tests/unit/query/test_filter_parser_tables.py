"""The CEL parser's lark tables kept beside the bytecode (app.query.filter.cel_parser): read back, they parse
and lex exactly as the tables celpy builds; a bad file is rebuilt over, and nothing is written under
PYTHONDONTWRITEBYTECODE."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from celpy.celparser import CELParser
from lark import Lark

from app.query.filter import cel_parser, tables_path

EXPRESSIONS = ['name == "web" && replicas > 2', "true || !false", '!(labels["a.b"] in ["x", "y"])',
               "size(name) >= 3u && 1.5e3 < 2000.0", "name.matches('^w.*') ? 1 : -0x10",
               "image.startsWith('nginx') // a comment\n && state != 'failed'"]


@pytest.fixture
def fresh_celpy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """celpy's process-wide parser unset for the test, restored after it."""
    kept = CELParser.CEL_PARSER
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    CELParser.CEL_PARSER = None
    try:
        yield
    finally:
        CELParser.CEL_PARSER = kept


def _built() -> Lark:
    CELParser.CEL_PARSER = None
    CELParser()
    built = CELParser.CEL_PARSER
    assert built is not None
    return built


@pytest.mark.usefixtures("fresh_celpy")
def test_tables_read_back_parse_and_lex_as_built_ones(tmp_path: Path) -> None:
    tables = tmp_path / "__pycache__" / "cel.pickle"
    cel_parser(tables)
    assert tables.is_file()
    CELParser.CEL_PARSER = None
    cel_parser(tables)
    loaded = CELParser.CEL_PARSER
    built = _built()
    assert loaded is not None and loaded is not built
    for expression in EXPRESSIONS:
        assert loaded.parse(expression) == built.parse(expression)
        lexed, rebuilt = list(loaded.lex(expression)), list(built.lex(expression))
        assert [(t.type, str(t), t.start_pos) for t in lexed] == [(t.type, str(t), t.start_pos) for t in rebuilt]
    assert any(t.type == "BOOL_LIT" for t in loaded.lex("true || x"))   # celpy's lexer callback kept


@pytest.mark.usefixtures("fresh_celpy")
def test_a_bad_file_is_built_over(tmp_path: Path) -> None:
    tables = tmp_path / "cel.pickle"
    tables.write_bytes(b"not a pickle")
    parser = cel_parser(tables)
    assert parser.parse("a == 1") is not None
    assert tables.read_bytes() != b"not a pickle"


@pytest.mark.usefixtures("fresh_celpy")
def test_nothing_is_written_under_dont_write_bytecode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    tables = tmp_path / "cel.pickle"
    assert cel_parser(tables).parse("a == 1") is not None
    assert not tables.exists()


def test_the_tables_name_their_versions() -> None:
    path = tables_path(Path("/nowhere"))
    assert path.parent == Path("/nowhere")
    assert path.name.startswith(f"cel-lark.{sys.implementation.cache_tag}.") and path.suffix == ".pickle"
    assert path == tables_path(Path("/nowhere"))
