"""Render named blocks of a page's template alone: what the page script fetches to refresh a live part.

A request with ``Shoal-Fragment: a, b`` gets each block as ``<template data-block="a">…</template>``; the
script swaps them into the elements carrying the same ``data-block``. The blocks render from the same
template and the same data as the full page, so a refreshed part is exactly what a reload would show.
"""

from __future__ import annotations

import re
from typing import Any

from flask import current_app
from jinja2 import Template
from markupsafe import Markup, escape

HEADER = "Shoal-Fragment"
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
MAX_BLOCKS = 8


def requested_blocks(value: str | None) -> list[str] | None:
    """The block names a fragment request asks for (None: the whole page); unknown shapes are dropped."""
    if value is None:
        return None
    names = [part.strip() for part in value.split(",")]
    return [name for name in names if _NAME.match(name)][:MAX_BLOCKS]


def render_blocks(template: Template, names: list[str], context: dict[str, Any]) -> str:
    current_app.update_template_context(context)
    ctx = template.new_context(context)
    parts = []
    for name in names:
        block = template.blocks.get(name)
        body = Markup("".join(block(ctx))) if block is not None else Markup("")
        parts.append(Markup('<template data-block="{}">{}</template>').format(escape(name), body))
    return "".join(parts)
