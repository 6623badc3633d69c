"""Per-item cost of compiled filter predicates, against celpy's own evaluator.

    .venv/bin/python bench/bench_filter.py [--repeat 7]

Task activations come from the synthetic cluster (``bench.synthetic``) through the cache's own entry
builder, so field values are as long and as repetitive as the real ones. For each expression it prints
the compile time (uncached) and the best-of-``repeat`` µs/item of ``[a for a in acts if predicate(a)]``
over 10k and 50k activations, then celpy's interpreted evaluator on the first 1k activations (converted
to celtypes beforehand, so only evaluation is timed), and checks that both agree on those 1k items.
``matches`` memoises its answer per distinct text: ``image`` values repeat, ``id`` values do not.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: `app`, `bench`

import celpy
from celpy import celtypes

from app.cache.entries import build_entry
from app.query.filter import Predicate, build_filter
from app.resources import ResourceKind
from bench.synthetic import ClusterShape, build_snapshot

EXPRESSIONS = (
    'state == "running" && slot > 1',
    'state not in ["shutdown", "complete"] && exit_code != 0',
    'image.startsWith("registry.example.com/shop/") || error.contains("exit")',
    r'image.matches("^registry\\.example\\.com/shop/(api|web):")',
    'id.matches("^[a-m][0-9]")',
    'slot % 2 == 0 && size(service) == 25 ? desired_state == "running" : false',
)
SIZES = (10_000, 50_000)
CELPY_ITEMS = 1_000

Activation = Mapping[str, str | int]


def task_activations(count: int) -> list[Activation]:
    snapshot = build_snapshot(ClusterShape(tasks=count))
    return [build_entry(ResourceKind.TASK, raw).activation for raw in snapshot[ResourceKind.TASK]]


def best_seconds(run: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best


def to_celtypes(activation: Activation) -> dict[str, celtypes.Value]:
    return {name: celtypes.IntType(value) if isinstance(value, int) else celtypes.StringType(value)
            for name, value in activation.items()}


def celpy_text(expression: str) -> str:
    """celpy does not know ``not in``; the one use above is rewritten by hand."""
    return expression.replace('state not in ["shutdown", "complete"]',
                              '!(state in ["shutdown", "complete"])')


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7, help="timed runs per figure; the best is kept")
    args = parser.parse_args(argv)
    logging.getLogger("celpy").setLevel(logging.CRITICAL)

    started = time.perf_counter()
    activations = task_activations(max(SIZES))
    print(f"built {len(activations)} task activations in {time.perf_counter() - started:.1f} s")
    cel_activations = [to_celtypes(a) for a in activations[:CELPY_ITEMS]]
    env = celpy.Environment()

    sizes = " ".join(f"{f'{n // 1000}k us/item':>12}" for n in SIZES)
    header = (f"{'expression':74} {'compile ms':>10} {sizes} {'celpy us/item':>14} {'speed-up':>9} "
              f"{'agree':>6}")
    print(header)
    print("-" * len(header))
    for expression in EXPRESSIONS:
        start = time.perf_counter()
        predicate, _ = build_filter(expression, ResourceKind.TASK)
        compile_ms = (time.perf_counter() - start) * 1000
        ours = []
        for size in SIZES:
            def run_ours(items: list[Activation] = activations[:size],
                         p: Predicate = predicate) -> list[Activation]:
                return [a for a in items if p(a)]
            ours.append(best_seconds(run_ours, args.repeat) / size * 1e6)

        program = env.program(env.compile(celpy_text(expression)))
        celpy_results: list[bool] = []

        def run_celpy(program: celpy.Runner = program, sink: list[bool] = celpy_results) -> None:
            sink.clear()
            sink.extend(bool(program.evaluate(a)) for a in cel_activations)

        celpy_us = best_seconds(run_celpy, max(1, args.repeat // 3)) / CELPY_ITEMS * 1e6
        agree = celpy_results == [predicate(a) for a in activations[:CELPY_ITEMS]]
        print(f"{expression:74} {compile_ms:10.2f} " + " ".join(f"{us:12.3f}" for us in ours)
              + f" {celpy_us:14.1f} {celpy_us / ours[0]:8.0f}x {'yes' if agree else 'NO':>6}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
