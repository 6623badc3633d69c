"""The official AsyncAPI CLI (npm ``@asyncapi/cli``, installed by scripts/setup into .tools/asyncapi) accepts
the ``/api/asyncapi.json`` that gunicorn serves, with warnings counted as failures; and refuses the same
document with a relative ``externalDocs.url`` (a defect once shipped), so the check can fail."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import requests

pytestmark = pytest.mark.integration
TOOLS = Path(__file__).resolve().parents[2] / ".tools" / "asyncapi"
CLI = TOOLS / "node_modules" / ".bin" / "asyncapi"


def validate(document: dict[str, object], directory: Path) -> subprocess.CompletedProcess[str]:
    """``asyncapi validate --fail-severity warn`` on ``document``; analytics off (no network)."""
    assert CLI.exists(), f"{CLI} missing: scripts/setup installs @asyncapi/cli into {TOOLS}"
    path = directory / "asyncapi.json"
    path.write_text(json.dumps(document))
    env = {**os.environ, "ASYNCAPI_METRICS_CONFIG_PATH": str(TOOLS / "analytics.json"),
           "SUPPRESS_NO_CONFIG_WARNING": "1", "CI": "true"}
    return subprocess.run([str(CLI), "validate", str(path), "--fail-severity", "warn"], cwd=directory, env=env,
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_asyncapi_cli_accepts_the_served_document(server: str, tmp_path: Path) -> None:
    response = requests.get(f"{server}/api/asyncapi.json", timeout=10)
    assert response.status_code == 200
    document = response.json()
    assert document["info"]["externalDocs"]["url"] == f"{server}/api"
    assert document["servers"]["shoal"]["variables"]["host"]["default"] == server.split("//", 1)[1]
    result = validate(document, tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0 and "is valid" in output, output[-4000:]
    document["info"]["externalDocs"]["url"] = "/api"     # what was served before
    refused = validate(document, tmp_path)
    assert refused.returncode != 0, refused.stdout[-2000:]
    assert "info.externalDocs.url" in refused.stdout + refused.stderr
