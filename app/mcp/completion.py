"""Placeholder: filled by its own part (see app/mcp/registry.py)."""
