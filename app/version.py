"""What is running: the package version, and the commit and build date ``/-/health`` reports.

Commit and build date come from ``SHOAL_BUILD_COMMIT`` / ``SHOAL_BUILD_DATE`` when a packaging step sets
them, else from the git checkout the package runs from (the commit's date stands for the build date of
a source tree), else ``unknown`` / null. Looked up once, on first use, never at import.
"""

from __future__ import annotations

import functools
import os
import subprocess
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

try:
    VERSION = version("shoal")
except PackageNotFoundError:  # running from a source tree that was not installed
    VERSION = "0.0.0+source"

_SOURCE_TREE = Path(__file__).resolve().parent.parent


@dataclass(frozen=True, slots=True)
class BuildInfo:
    commit: str
    build_date: str | None


def _from_git() -> tuple[str, str] | None:
    try:
        result = subprocess.run(["git", "-C", str(_SOURCE_TREE), "log", "-1", "--format=%H%n%cI"],
                                capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = result.stdout.split()
    return (lines[0], lines[1]) if result.returncode == 0 and len(lines) == 2 else None


@functools.cache
def build_info() -> BuildInfo:
    commit, date = os.environ.get("SHOAL_BUILD_COMMIT"), os.environ.get("SHOAL_BUILD_DATE")
    if not commit or not date:
        found = _from_git() if (_SOURCE_TREE / ".git").exists() else None
        commit = commit or (found[0] if found else "unknown")
        date = date or (found[1] if found else None)
    return BuildInfo(commit, date)
