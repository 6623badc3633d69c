"""No filter stalls the real server (docs/filter-cost.md): gunicorn with its one gevent worker, following the lab swarm.
Pathological filters (a pattern built from a field, heavy constant patterns, patterns RE2 refuses) are
answered with FLT006 or finish, while /-/health probes on fresh connections keep answering quickly."""

from __future__ import annotations

import random
import time
from urllib.parse import quote

import gevent
import pytest
import requests

pytestmark = pytest.mark.integration

HEALTH_BOUND = 0.25          # no filter of at most 512 characters makes /-/health wait longer
ROUNDS = 3


def pathological(salt: str) -> list[str]:
    """Each at most 512 characters; ``salt`` keeps the compiled-filter and regex caches from helping."""
    dynamic_refused = ('id.matches(id + "\\\\pL{400}") || image.matches(image + "\\\\pL{400}") || '
                       f'error.matches(node + "\\\\pL{{400}}{salt}")')
    dynamic_heavy = " || ".join(f'id.matches(id + "\\\\pL{{19}}{salt}{i}")' for i in range(10))
    constant_refused = " || ".join(f'id.matches("\\\\pL{{400}}{salt}{i}")' for i in range(14))
    constant_heavy = " || ".join(f'id.matches("\\\\pL{{19}}{salt}{i:x}")' for i in range(14))
    filters = [dynamic_refused, dynamic_heavy, constant_refused, constant_heavy]
    assert all(len(expression) <= 512 for expression in filters), [len(f) for f in filters]
    return filters


def test_pathological_filters_are_refused_or_finish_while_health_stays_quick(server: str) -> None:
    probes: list[float] = []
    stop = False

    def prober() -> None:
        while not stop and len(probes) < 2000:
            started = time.perf_counter()
            response = requests.get(server + "/-/health", timeout=5,
                                    headers={"Connection": "close"})        # a fresh connection each time
            probes.append(time.perf_counter() - started)
            assert response.status_code == 200
            gevent.sleep(0.01)   # the probes' pacing, not a wait

    probe_thread = gevent.spawn(prober)
    outcomes: list[tuple[int, str | None, float]] = []
    try:
        with requests.Session() as session:
            for round_ in range(ROUNDS):
                salt = f"{random.randrange(16**6):06x}{round_}"
                for expression in pathological(salt):
                    started = time.perf_counter()
                    response = session.get(server + "/tasks?filter=" + quote(expression), timeout=10,
                                           headers={"Accept": "application/json"})
                    elapsed = time.perf_counter() - started
                    code = response.json().get("code") if response.status_code == 400 else None
                    outcomes.append((response.status_code, code, elapsed))
    finally:
        stop = True
        probe_thread.join(timeout=10)
    assert probe_thread.successful(), probe_thread.exception
    assert all(status == 200 or (status, code) == (400, "FLT006") for status, code, _ in outcomes), outcomes
    assert sum(1 for _, code, _ in outcomes if code == "FLT006") >= 2 * ROUNDS
    assert max(elapsed for *_, elapsed in outcomes) < 1.0, outcomes
    assert len(probes) >= 20
    assert max(probes) < HEALTH_BOUND, sorted(probes)[-5:]
