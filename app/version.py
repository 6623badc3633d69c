"""The running version, from the installed package metadata."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("shoal")
except PackageNotFoundError:  # running from a source tree that was not installed
    VERSION = "0.0.0+source"
