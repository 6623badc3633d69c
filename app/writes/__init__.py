"""Gated writes: the operation table (tiers), patch documents, and the audit of writes made here.

Engine calls live in ``app.engine.writes``; the HTTP side (level check, bodies, preconditions, ``Prefer``,
problems) in ``app.http.writes``; the views in ``app.blueprints.*_writes``.
"""
