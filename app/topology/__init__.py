"""The topology views (docs/topology.md): graphs built from the cache (``model``, ``logical``, ``physical``),
rendered separately as JGF (``jgf``), GraphML (``graphml``), DOT (``dot``) and the legacy flat views
(``legacy``). Nothing here knows HTTP; ``app.blueprints.topology`` negotiates and responds."""
