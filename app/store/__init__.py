"""The embedded state store (docs/state-store.md): history, the change sequence, its epoch and the last cache
snapshot in one SQLite file, so a restart continues the sequence and loses no change. ``database`` is the
file (blocking, on the store thread), ``persister`` the gevent side (restore, batched writes, stop)."""
