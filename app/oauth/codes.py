"""Authorization codes: random, single use, 60 s, bound to everything the token request must repeat.

They live in this worker's memory only (a code is redeemed seconds after it is issued; a restart in
between just makes the agent authorize again). The map is bounded: past :data:`MAX_CODES` the oldest go.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

CODE_TTL = 60.0
MAX_CODES = 10_000


@dataclass(frozen=True, slots=True)
class CodeGrant:
    client_id: str
    redirect_uri: str
    code_challenge: str        # S256 of the verifier
    resource: str
    subject: str
    groups: tuple[str, ...]
    expires: float
    refresh: bool = True       # the client registered the refresh_token grant: the exchange gives one


class CodeStore:
    def __init__(self, ttl: float = CODE_TTL, max_codes: int = MAX_CODES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._codes: OrderedDict[str, CodeGrant] = OrderedDict()
        self._ttl, self._max, self._clock = ttl, max_codes, clock

    def issue(self, client_id: str, redirect_uri: str, code_challenge: str, resource: str, subject: str,
              groups: tuple[str, ...], *, refresh: bool = True) -> str:
        now = self._clock()
        while self._codes and (len(self._codes) >= self._max or next(iter(self._codes.values())).expires <= now):
            self._codes.popitem(last=False)
        code = secrets.token_urlsafe(32)
        self._codes[code] = CodeGrant(client_id, redirect_uri, code_challenge, resource, subject, groups,
                                      now + self._ttl, refresh)
        return code

    def redeem(self, code: str) -> CodeGrant | None:
        """The code's grant, once: the code is gone afterwards whether or not the rest of the request holds."""
        grant = self._codes.pop(code, None)
        if grant is None or grant.expires <= self._clock():
            return None
        return grant
