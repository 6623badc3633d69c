"""The layer rule: lower parts import nothing above them.

Every ``import`` statement of ``app/`` is read with ``ast`` (those inside functions and under
``TYPE_CHECKING`` too: a late import is still a dependency), so a cycle cannot hide behind an import moved
into a function, as ``app.config.loading`` → ``app.acl.source`` → ``app.config`` once did.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

APP = Path(__file__).resolve().parents[2] / "app"
# Only these may import the blueprints: the factory registers them, the OpenAPI document completes them.
BLUEPRINT_IMPORTERS = ("app.blueprints", "app.factory", "app.openapi")
# The configuration is the bottom layer: it imports only itself (plus the standard library and third parties).
CONFIG_MAY_IMPORT = ("app.config",)


def _module_name(path: Path) -> str:
    parts = path.relative_to(APP.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module: str | None = None) -> set[str]:
    """The ``app.*`` modules a file imports, relative imports resolved (``module``: the file's dotted name)."""
    module = module or _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)   # ``from app import blueprints``
    return {name for name in found if name == "app" or name.startswith("app.")}


GRAPH = {_module_name(path): _imports(path) for path in sorted(APP.rglob("*.py"))}


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def test_the_walk_sees_the_whole_package() -> None:
    assert len(GRAPH) > 100
    assert "app.http.cors" in GRAPH["app.http"]          # the walker resolves what it must judge
    assert "app.blueprints.oidc" in GRAPH["app.factory"]


@pytest.mark.parametrize("module", sorted(name for name in GRAPH if _within(name, ("app.config",))))
def test_config_imports_nothing_above_it(module: str) -> None:
    above = sorted(name for name in GRAPH[module] if not _within(name, CONFIG_MAY_IMPORT))
    assert not above, f"{module} imports {above}"


def test_only_the_factory_and_the_openapi_document_import_blueprints() -> None:
    offenders = {module: sorted(name for name in imports if _within(name, ("app.blueprints",)))
                 for module, imports in GRAPH.items() if not _within(module, BLUEPRINT_IMPORTERS)}
    assert not {module: names for module, names in offenders.items() if names}


@pytest.mark.parametrize("lower", ["app.config", "app.errors", "app.resources", "app.cache", "app.engine",
                                   "app.acl", "app.auth", "app.store"])
def test_lower_parts_do_not_import_blueprints(lower: str) -> None:
    for module, imports in GRAPH.items():
        if _within(module, (lower,)):
            assert not any(_within(name, ("app.blueprints",)) for name in imports), module


def test_the_rule_catches_a_late_import(tmp_path: Path) -> None:
    """The walker finds an import inside a function (where the old cycle hid)."""
    source = tmp_path / "late.py"
    source.write_text("from . import keys\n\ndef f():\n    from app.acl.source import check_policy\n"
                      "    return check_policy\n")
    imports = _imports(source, "app.config.late")
    assert {"app.config.keys", "app.acl.source"} <= imports
    assert [name for name in imports if not _within(name, CONFIG_MAY_IMPORT)]   # the rule would fail it
