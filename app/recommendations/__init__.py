"""Recommendations: checks over the cached cluster state, evaluated after each change batch (debounced),
and the findings they produce (``/recommendations``)."""
