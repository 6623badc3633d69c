"""Who is asking: one Identity per request, made by the provider of the configured ``auth.mode``.

``identity.py`` the Identity every provider produces; ``providers.py`` the provider protocol and the mode
registry; one module per mode (``headers.py``, ``oidc.py``, ``cert.py``); the HTTP hook that runs the
provider and answers 401 lives in ``app.http.auth``.
"""
