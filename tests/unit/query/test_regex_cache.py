"""RE2 programs for matches(): compiled under a memory budget, cached by pattern, bounded in count and bytes
(app.query.regex_cache, app.query.lru); a pattern RE2 refuses for its size is FLT006, fast (docs/filter-cost.md)."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping

import pytest
import re2

from app.errors import ProblemError
from app.query import regex_cache
from app.query.filter import clear_filter_cache, compile_filter
from app.query.lru import BoundedLRU
from app.query.regex_cache import RE2_MAX_MEM, RegexCache, RegexError, estimate_bytes
from app.resources import ResourceKind

TASK: Mapping[str, str | int] = {
    "id": "t1", "state": "running", "desired_state": "running", "image": "nginx:1.27", "exit_code": 0,
    "error": "", "service": "web", "node": "n1", "slot": 3,
}
# The shape of a 132-character filter that once stalled the worker: every item compiles its own \pL{400} program, which
# took about 280 ms each with RE2's default 8 MiB budget (30 s on the hub until gunicorn killed the worker).
DYNAMIC_HEAVY = ('id.matches(id + "\\\\pL{400}") || image.matches(image + "\\\\pL{400}") || '
                 'error.matches(node + "\\\\pL{400}")')


@pytest.fixture(autouse=True)
def fresh_caches() -> Iterator[None]:
    regex_cache.CACHE.clear()
    clear_filter_cache()
    yield
    regex_cache.CACHE.clear()
    clear_filter_cache()


# --------------------------------------------------------------------------- the generic bounded LRU
def test_lru_is_bounded_in_count_and_evicts_the_least_recently_used() -> None:
    lru: BoundedLRU[str, int] = BoundedLRU(max_entries=3, max_bytes=1000)
    for key in "abc":
        lru.put(key, ord(key), 10)
    assert lru.get("a") == ord("a")          # a is now the most recent
    lru.put("d", 4, 10)
    assert "b" not in lru and {"a", "c", "d"} == {k for k in "abcd" if k in lru}
    assert (len(lru), lru.bytes, lru.stats().evictions) == (3, 30, 1)


def test_lru_is_bounded_in_bytes_and_refuses_an_entry_over_the_whole_bound() -> None:
    lru: BoundedLRU[str, int] = BoundedLRU(max_entries=100, max_bytes=100)
    for index in range(10):
        lru.put(f"k{index}", index, 30)
        assert lru.bytes <= 100
    assert len(lru) == 3 and all(f"k{index}" in lru for index in (7, 8, 9))
    assert lru.put("huge", 0, 101) is False and "huge" not in lru and lru.bytes == 90
    lru.put("k9", 9, 50)                     # replacing an entry re-accounts its size
    assert lru.bytes == 80 and len(lru) == 2


# --------------------------------------------------------------------------- the regex cache
def test_programs_are_cached_by_pattern_and_bounded_in_count() -> None:
    cache = RegexCache(max_programs=3, max_bytes=1 << 30)
    first, _ = cache.compile("^a")
    assert cache.compile("^a")[0] is first
    for pattern in ("^b", "^c", "^d"):
        cache.compile(pattern)
    assert cache.stats().entries == 3
    assert cache.compile("^a")[0] is not first          # evicted, compiled again


def test_programs_are_bounded_in_estimated_bytes() -> None:
    heavy = [f"\\pL{{20}}x{index}" for index in range(6)]
    one = estimate_bytes(heavy[0], 24_000)
    cache = RegexCache(max_programs=1000, max_bytes=3 * one)
    for pattern in heavy:
        cache.compile(pattern)
        assert cache.stats().bytes <= 3 * one
    stats = cache.stats()
    assert stats.entries == 3 and stats.evictions == 3


def test_the_estimate_covers_the_measured_program_memory_and_is_capped_by_re2s_budget() -> None:
    regex, size = RegexCache().compile("\\pL{20}")
    assert regex.programsize > 20_000
    assert size >= 8 * regex.programsize                 # measured RSS: about 8 bytes per instruction
    assert size <= RE2_MAX_MEM + 1024 + 2 * len("\\pL{20}")
    assert RegexCache().compile("^web$")[1] < 4096


def test_re2_refuses_a_huge_program_fast_instead_of_building_it() -> None:
    cache = RegexCache()
    started = time.perf_counter()
    with pytest.raises(RegexError) as caught:
        cache.compile("\\pL{400}")                        # 280 ms and 8 MB with RE2's default budget
    assert time.perf_counter() - started < 0.1
    assert caught.value.too_costly
    with pytest.raises(RegexError) as invalid:
        cache.compile("(")
    assert not invalid.value.too_costly


def test_refusals_are_cached_too() -> None:
    cache = RegexCache()
    for _ in range(3):
        with pytest.raises(RegexError):
            cache.compile("\\pL{400}")
    stats = cache.stats()
    assert (stats.misses, stats.hits) == (1, 2)


def test_the_re2_modules_own_program_cache_is_bypassed() -> None:
    before = re2._Regexp._make.cache_info().currsize
    for index in range(20):
        RegexCache().compile(f"^bypass{index}")
    assert re2._Regexp._make.cache_info().currsize == before


def test_the_programs_are_compiled_with_the_memory_budget() -> None:
    regex, _ = RegexCache().compile("^x")
    assert regex.options.max_mem == RE2_MAX_MEM


# --------------------------------------------------------------------------- through the filter
def test_a_constant_pattern_re2_refuses_is_flt006_at_compile_time_with_its_position() -> None:
    started = time.perf_counter()
    with pytest.raises(ProblemError) as caught:
        compile_filter('state == "x" || id.matches("\\\\pL{400}")', ResourceKind.TASK)
    assert time.perf_counter() - started < 0.1
    error = caught.value
    assert (error.code, error.status, error.extra["position"]) == ("FLT006", 400, 27)
    assert "Simplify the pattern" in error.detail


def test_an_invalid_constant_pattern_stays_flt002() -> None:
    with pytest.raises(ProblemError) as caught:
        compile_filter('id.matches("(")', ResourceKind.TASK)
    assert caught.value.code == "FLT002"


def test_a_pattern_built_from_a_field_that_re2_refuses_is_flt006_for_the_item_and_fast() -> None:
    predicate = compile_filter(DYNAMIC_HEAVY, ResourceKind.TASK)
    started = time.perf_counter()
    with pytest.raises(ProblemError) as caught:
        predicate(TASK)
    assert time.perf_counter() - started < 0.1            # three refusals of about 2 to 3 ms each
    assert caught.value.code == "FLT006"


def test_a_refused_dynamic_pattern_follows_cels_error_rules_like_any_evaluation_error() -> None:
    predicate = compile_filter('id.matches(id + "\\\\pL{400}") || state == "running"', ResourceKind.TASK)
    assert predicate(TASK) is True                       # error || true is true
    with pytest.raises(ProblemError) as caught:
        predicate({**TASK, "state": "failed"})
    assert caught.value.code == "FLT006"


def test_an_invalid_pattern_built_from_a_field_stays_flt003() -> None:
    predicate = compile_filter('id.matches(id + "(")', ResourceKind.TASK)
    with pytest.raises(ProblemError) as caught:
        predicate(TASK)
    assert caught.value.code == "FLT003"


# --------------------------------------------------------------------------- memory of many heavy filters
def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096


def test_33_distinct_heavy_filters_stay_within_the_cache_bounds() -> None:
    """On the previous main, 33 such filters grew the worker from 62 MB to 726 MB."""
    from app.query.filter import MAX_CACHED_BYTES, filter_cache_stats

    before = rss_bytes()
    for index in range(33):
        accepted = " || ".join(f'id.matches("\\\\pL{{19}}{index}x{i}")' for i in range(4))
        predicate = compile_filter(accepted, ResourceKind.TASK)
        for n in range(300):                         # fill its memos to their cap
            predicate({**TASK, "id": f"task-{index}-{n}" * 3})
        refused = " || ".join(f'id.matches("\\\\pL{{400}}{index}x{i}")' for i in range(14))
        assert len(refused) <= 512
        with pytest.raises(ProblemError) as caught:  # that kind: refused, never built
            compile_filter(refused, ResourceKind.TASK)
        assert caught.value.code == "FLT006"
        filters, programs = filter_cache_stats(), regex_cache.CACHE.stats()
        assert filters.bytes <= MAX_CACHED_BYTES and programs.bytes <= regex_cache.MAX_BYTES
    assert filter_cache_stats().evictions > 0        # each weighs about 2.3 MiB: only a few fit in 8 MiB
    grown = rss_bytes() - before
    assert grown < (MAX_CACHED_BYTES + regex_cache.MAX_BYTES) + (32 << 20), grown / 2**20
