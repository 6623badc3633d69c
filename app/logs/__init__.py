"""Log lines, independent of HTTP and of the engine: nanosecond timestamps and the cursor rule
(``timestamps``), the ``LogLine`` value and its parsing from an engine payload (``lines``), the query
parameters (``params``), the JSON page (``page``) and the labels read from the cache (``labels``).

Flow: ``app.engine.logs`` reads and demultiplexes the engine's frames → ``lines.parse_line`` →
``params.LogQuery.keeps`` → ``page.build_page`` (JSON) or one SSE event per line (``app.blueprints.logs``).
The agent-tool ``get_logs`` reuses ``page.tool_result`` (``{lines, cursor}``).
"""
