"""The generated interface pages (docs/errors.md, docs/configuration.md, docs/endpoints.md) are what
scripts/gen-docs writes from the code now: a new error code, key or route without a regenerated page fails here."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.config import describe_keys
from app.errors import REGISTRY

ROOT = Path(__file__).resolve().parents[2]
COMMAND = ".venv/bin/python scripts/gen-docs"
PAGES = ("errors.md", "configuration.md", "endpoints.md")


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The three pages regenerated into a temporary directory by the script itself (a process of its own: the
    apps it builds never touch this one)."""
    out = tmp_path_factory.mktemp("docs")
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen-docs"), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"scripts/gen-docs failed:\n{done.stderr[-3000:]}"
    return out


@pytest.mark.parametrize("page", PAGES)
def test_committed_page_is_current(generated: Path, page: str) -> None:
    committed = ROOT / "docs" / page
    assert committed.exists(), f"docs/{page} is missing: run {COMMAND} and commit it"
    fresh = (generated / page).read_text(encoding="utf-8")
    assert committed.read_text(encoding="utf-8") == fresh, \
        f"docs/{page} is not what the code says now: run {COMMAND} and commit the result"


def test_pages_name_every_code_key_and_route(generated: Path) -> None:
    """The generator itself misses nothing: every registered code, every key and the routes of every part."""
    errors = (generated / "errors.md").read_text(encoding="utf-8")
    assert [code for code in REGISTRY if f"| `{code}` |" not in errors] == []
    configuration = (generated / "configuration.md").read_text(encoding="utf-8")
    assert [toml for toml, env, _ in describe_keys() if f"| `{toml}` | `{env}` |" not in configuration] == []
    assert "(no description yet" not in configuration, "a key has no meaning: add it to MEANINGS in scripts/gen-docs"
    endpoints = (generated / "endpoints.md").read_text(encoding="utf-8")
    for row in ("| GET | `/services/{id}` |", "| PUT | `/services/{id}/scale` |", "| GET | `/history/{seq}` |",
                "| PATCH | `/swarm/raft` |", "| GET | `/api/errors/{code}` |"):
        assert row in endpoints
    levels = {(row[0].strip("| "), row[1].strip("`")): row[3] for row in
              (line.split(" | ") for line in endpoints.splitlines() if " | `/" in line)}
    assert levels[("PUT", "/services/{id}/scale")] == "1" and levels[("DELETE", "/services/{id}")] == "3"
    assert levels[("GET", "/services/{id}")] == "—"
    rows = [line.split(" | ") for line in endpoints.splitlines() if line.startswith("| ") and " | `/" in line]
    assert len(rows) > 100
    assert [row[1] for row in rows if row[2] == "—"] == [], "routes without a purpose: give the view a docstring"
    assert [row[1] for row in rows if row[4] == "—"] == [], \
        "routes without a docs page: add their prefix to _ENDPOINT_PAGES in scripts/gen-docs"


_FOREIGN = re.compile(r"reference\s*§|\breference\.md\b|shared/spec|\bissue\s+#?\d+|\bthe issue\b|\bthe reference\b",
                      re.IGNORECASE)


def test_docs_cite_only_themselves() -> None:
    """docs/ and the README describe the interface in their own words: no citation of documents a reader of
    this repository does not have (an external reference and its sections, issue numbers). A section sign is
    only used for RFC sections."""
    found = []
    for page in [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]:
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
            cited = [match.group() for match in _FOREIGN.finditer(line)]
            cited += [line[max(0, at - 12):at + 4] for at in (i for i, char in enumerate(line) if char == "§")
                      if "RFC" not in line[max(0, at - 14):at]]
            found += [f"{page.relative_to(ROOT)}:{number}: {text}" for text in cited]
    assert found == [], "state the fact or link the docs page instead:\n" + "\n".join(found)
