"""The hub's replay of a ``Last-Event-ID`` against a renumbered or gapped sequence (the store's numbering):
an id from an earlier sequence gets ``sync`` whatever its value; after an unclean stop an id inside the gap
gets ``sync``, a committed one exactly what followed, across the gap."""

from __future__ import annotations

import json
import re
from typing import Any

from app.cache.history import sequence_base
from app.cache.store import Cache
from app.resources import ResourceKind
from app.streams.events import ALL
from app.streams.hub import Hub
from tests.unit.objects import config

K = ResourceKind
_FRAME = re.compile(rb"id: (\d+)\nevent: (\w+)\ndata: (.*)\n\n")


def _frames(chunks: object) -> list[tuple[int, str, Any]]:
    assert not isinstance(chunks, bytes)
    data = b"".join(chunks)  # type: ignore[arg-type]
    return [(int(seq), name.decode(), json.loads(body)) for seq, name, body in _FRAME.findall(data)]


def _creates(cache: Cache, prefix: str, count: int) -> list[int]:
    """``count`` config creates; their sequence numbers."""
    seqs = []
    for number in range(count):
        cache.upsert(K.CONFIG, config(f"{prefix}{number:03d}", f"{prefix}-{number}", version=1))
        seqs.append(cache.history.last_seq)
    return seqs


def _replay(cache: Cache, last_event_id: int) -> list[tuple[int, str, Any]]:
    hub = Hub(cache, batch_interval=60.0)
    client = hub.open(frozenset({ALL}))
    return _frames(hub.replay(client, str(last_event_id)))


def test_every_id_of_an_earlier_numbering_gets_sync_whatever_its_value() -> None:
    before = Cache()
    before.history.restore((), sequence_base(1_700_000_000))
    old_ids = _creates(before, "old", 23)
    now = Cache()                      # persistence off: the next process starts a new sequence
    now.history.restore((), sequence_base(1_700_000_060))
    _creates(now, "new", 23)
    for old in old_ids:
        frames = _replay(now, old)
        assert [name for _, name, _ in frames] == ["sync"], old
    start = now.history.oldest_seq
    assert start is not None
    assert len([item for _, name, data in _replay(now, start - 1) for item in (data if name == "batch" else [data])]) \
        == 23


def test_after_a_gap_a_committed_id_replays_across_it_and_an_id_inside_it_gets_sync() -> None:
    crashed = Cache()
    crashed.history.restore((), sequence_base(1_700_000_000))
    committed = _creates(crashed, "kept", 5)
    sent_not_committed = [committed[-1] + 1, committed[-1] + 2]   # what a killed process may have sent
    records = list(crashed.history.newest_first())[::-1]
    restarted = Cache()
    gap_end = sequence_base(1_700_000_030)
    restarted.history.restore(records, gap_end)
    after = _creates(restarted, "after", 3)
    assert after[0] == gap_end + 1
    frames = _replay(restarted, committed[2])
    items = [item for _, name, data in frames for item in (data if name == "batch" else [data])]
    assert [item["id"] for item in items] == ["kept003", "kept004", "after000", "after001", "after002"]
    assert frames[-1][0] == after[-1]
    for inside in (*sent_not_committed, gap_end - 1, after[-1] + 1):
        assert [name for _, name, _ in _replay(restarted, inside)] == ["sync"], inside
    assert _replay(restarted, gap_end)[0][2][0]["id"] == "after000"
