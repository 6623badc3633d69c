"""Cluster-wide read models computed from the cache: the overview (``/cluster``), node capacity
(``/cluster/capacity``) and per-stack summaries (``/stacks/summary``). Pure functions over a ``Cache``;
the HTTP side is ``app.blueprints.cluster``."""
