"""Who may see and change what: the policy model (``policy.py``), the one evaluator every enforcement point
asks (``evaluator.py``), loading and hot reload of the policy (``source.py``), and the request's Access
(``app.http.acl``)."""
