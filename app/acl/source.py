"""Where the policy comes from: inline config (``acl.policy``, wins) or a file (``acl.policy_file``).

MINIMAL VERSION (JSON only, no hot reload): the "acl" engineer completes it with YAML/TOML detection and the
hot-reloaded file watcher. The interface stays: ``PolicySource(settings)``, ``.policy`` (None = no policy),
``start()``, ``stop()``.
"""

from __future__ import annotations

import json

from app.acl.policy import Policy, parse_policy
from app.config import Settings


class PolicySource:
    def __init__(self, settings: Settings) -> None:
        self._policy: Policy | None = None
        if settings.acl_policy:
            self._policy = parse_policy(json.loads(settings.acl_policy), "acl.policy")

    @property
    def policy(self) -> Policy | None:
        return self._policy

    def start(self) -> None:
        return None

    def stop(self) -> None:
        return None
