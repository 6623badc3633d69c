"""The change history as clients read it: entries built from the cache's change records.

The records (``app.cache.history``) hold the raw engine objects before and after each change; this package
turns a page of them into history entries (``entries``): a one-line ``summary`` (``summary``) and a
field-level diff (``diff``), computed per requested page only, never over the whole ring. ``selection``
finds a page: filters, the ``before`` cursor and a bounded scan.
"""
