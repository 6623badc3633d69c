"""Server-Sent Events: change records from the cache, fanned out to event-stream clients.

Flow: ``Cache.subscribe`` → :class:`app.streams.hub.Hub` (batches each window, builds every event's JSON once,
routes frames to clients by scope) → :class:`app.streams.client.Client` (bounded queue per connection) →
:func:`app.streams.response.stream_response` (the WSGI body, written by the connection's own greenlet).
"""
