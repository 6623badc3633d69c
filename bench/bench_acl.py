"""What an active ACL policy costs on the foundation's list benchmark (target: <= 1.5x; docs/access.md).

    .venv/bin/python bench/bench_acl.py [--quick] [--iterations 200] [--skip http]

The synthetic cluster of ``bench/bench_api.py`` (100 nodes, 1,000 services, 10,000 tasks), the same two
requests (``GET /tasks?filter=state == "running" && slot > 1&sort=state&limit=50`` and the first page of
``/tasks``), asked by ``alice`` in auth mode ``headers`` (``X-User``/``X-Groups`` from 127.0.0.1, a trusted
proxy) under three configurations:

- ``none``: auth mode none (no identity, no evaluation): the foundation's figure;
- ``headers, no policy``: every authenticated user has full access (the baseline of the ratio);
- ``headers, 50 grants``: a realistic policy (stack and service globs, groups, users, nodes, a task id,
  ``*:…``) of which ~5 grants match alice, so a list runs the ACL filter over all 10,000 tasks
  (``app.acl.memo`` keeps the readable subset across requests until the cache changes; the ``cold`` rows
  clear it before every request: the cost right after a change).

Sections: the evaluator alone (``Access.can_read`` over the 10,000 tasks: cold = a new request's Access,
warm = memoised), in-process (Flask test client) and over HTTP (gunicorn with the production gevent
settings, ``bench/gunicorn_synthetic.py``, the policy in a file as ``acl.policy_file``). Each row: p50 / p99 /
max in ms; the ratio is policy p50 over no-policy p50. Answers are checked against the evaluator (a wrong
filter would make the timing meaningless). Results go to ``bench/results/acl.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: `app`, `bench`

import requests

from app import create_app
from app.acl.evaluator import access_for
from app.acl.memo import memo_for
from app.acl.policy import parse_policy
from app.auth.identity import Identity
from app.cache.store import Cache
from app.config import Settings
from app.resources import STACK_LABEL, ResourceKind
from app.runtime import runtime_of
from bench.bench_api import LIST_QUERY, environment, gunicorn_server
from bench.synthetic import ClusterShape, Snapshot, build_snapshot
from bench.timing import percentile

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "acl.json"
TARGET_RATIO = 1.5
USER, GROUPS, EMAIL = "alice", ("team-03", "ops"), "alice@example.com"
IDENTITY_HEADERS = {"X-User": USER, "X-Groups": ",".join(GROUPS), "X-Email": EMAIL, "Accept": "application/json"}
PROBES = {"filtered+sorted page": f"/tasks?{LIST_QUERY}", "first page": "/tasks"}


# ---------------------------------------------------------------- the policy
def fifty_grants(snapshot: Snapshot) -> dict[str, Any]:
    """50 grants over the synthetic cluster's names: 20 stacks for teams, 10 stack-prefix globs for teams,
    10 service globs for users, 5 node globs for groups, 5 others. alice (team-03, ops, …@example.com)
    matches 5 of them: one stack, one stack glob, one service glob (by subject), one node glob (ops), one
    ``config:*`` (by email glob)."""
    stacks = sorted({s["Spec"]["Labels"].get(STACK_LABEL, "") for s in snapshot[ResourceKind.SERVICE]} - {""})
    prefixes = sorted({name.rstrip("0123456789") for name in stacks})
    task_id = snapshot[ResourceKind.TASK][len(snapshot[ResourceKind.TASK]) // 3]["ID"]
    grants: list[dict[str, Any]] = []
    for i in range(20):
        grants.append({"resources": [f"stack:{stacks[i * 4]}"], "audience": [f"group:team-{i:02d}"],
                       "permissions": ["read", "write"] if i % 3 == 0 else ["read"]})
    for i in range(10):
        grants.append({"resources": [f"stack:{prefixes[i % len(prefixes)]}0[0-4]*"],
                       "audience": [f"group:team-{i + 3:02d}"], "permissions": ["read"]})
    for i in range(10):
        user = USER if i == 0 else f"user{i}"
        grants.append({"resources": [f"service:{stacks[i * 7 + 1]}_*"], "audience": [f"user:{user}"],
                       "permissions": ["write"]})
    for i in range(5):
        grants.append({"resources": [f"node:swarm-wrk-0{i}?"], "audience": ["group:ops" if i == 0 else f"group:dc{i}"],
                       "permissions": ["read"]})
    grants += [
        {"resources": ["config:*"], "audience": ["user:*@example.com"], "permissions": ["read"]},
        {"resources": ["secret:*"], "audience": ["group:security"], "permissions": ["read"]},
        {"resources": [f"task:{task_id}"], "audience": ["user:oncall"], "permissions": ["read"]},
        {"resources": ["*:monitoring*", "swarm:cluster"], "audience": ["group:sre"], "permissions": ["read"]},
        {"resources": ["*"], "audience": ["group:admins"], "permissions": ["write"]},
    ]
    assert len(grants) == 50
    return {"grants": grants}


def identity() -> Identity:
    return Identity(USER, USER, "headers", email=EMAIL, groups=GROUPS)


# ---------------------------------------------------------------- timing
@dataclass(slots=True)
class Row:
    section: str
    measurement: str
    configuration: str
    p50_ms: float
    p99_ms: float
    max_ms: float
    runs: int
    items: int | None = None        # total of the answer (readable matches), for the record


def timed(operation: Callable[[], object], iterations: int, warmup: int, max_seconds: float) -> list[float]:
    for _ in range(warmup):
        operation()
    samples: list[float] = []
    deadline = time.monotonic() + max_seconds
    for _ in range(iterations):
        started = time.perf_counter()
        operation()
        samples.append(time.perf_counter() - started)
        if len(samples) >= 30 and time.monotonic() > deadline:
            break
    return samples


def row(section: str, measurement: str, configuration: str, samples: list[float], items: int | None = None) -> Row:
    made = Row(section, measurement, configuration, percentile(samples, 50) * 1000, percentile(samples, 99) * 1000,
               max(samples) * 1000, len(samples), items)
    print(f"  {section:<10} {measurement:<34} {configuration:<20} p50 {made.p50_ms:7.2f}  p99 {made.p99_ms:7.2f}  "
          f"max {made.max_ms:7.2f} ms  ({made.runs} runs)", file=sys.stderr, flush=True)
    return made


# ---------------------------------------------------------------- configurations
CONFIGURATIONS = ("none", "headers, no policy", "headers, 50 grants")


def settings_for(configuration: str, policy: dict[str, Any]) -> dict[str, Any]:
    if configuration == "none":
        return {}
    values: dict[str, Any] = {"auth_mode": "headers", "headers_subject": "X-User", "headers_groups": "X-Groups",
                              "headers_email": "X-Email", "trusted_proxies": ("127.0.0.1/32",)}
    if configuration == "headers, 50 grants":
        values["acl_policy"] = json.dumps(policy)
    return values


def expected(snapshot: Snapshot, policy: dict[str, Any] | None) -> tuple[int, int]:
    """(filtered total, unfiltered total) alice must get, computed with the evaluator on a separate cache."""
    cache = Cache()
    cache.replace_all(snapshot)
    access = access_for(identity(), None if policy is None else parse_policy(policy), auth_enabled=True)
    tasks = [t for t in cache.entries(ResourceKind.TASK) if access.can_read(t, cache)]
    running = [t for t in tasks if t.raw["Status"]["State"] == "running" and int(t.raw.get("Slot") or 0) > 1]
    return len(running), len(tasks)


def check(body: dict[str, Any], want: int, what: str) -> int:
    if body["total"] != want:
        raise SystemExit(f"{what}: total {body['total']}, expected {want} (the ACL filter answers wrongly)")
    return int(body["total"])


# ---------------------------------------------------------------- sections
def bench_evaluator(snapshot: Snapshot, policy: dict[str, Any], args: argparse.Namespace) -> list[Row]:
    cache = Cache()
    cache.replace_all(snapshot)
    parsed, who = parse_policy(policy), identity()
    tasks = list(cache.entries(ResourceKind.TASK))
    matching = len(access_for(who, parsed, auth_enabled=True).grants)

    def cold() -> int:
        access = access_for(who, parsed, auth_enabled=True)
        return sum(1 for task in tasks if access.can_read(task, cache))

    warm_access = access_for(who, parsed, auth_enabled=True)

    def warm() -> int:
        return sum(1 for task in tasks if warm_access.can_read(task, cache))

    readable = cold()
    print(f"  evaluator: {matching} of 50 grants match {USER}; {readable} of {len(tasks)} tasks readable",
          file=sys.stderr)
    return [row("evaluator", f"can_read x {len(tasks)} tasks, cold", "50 grants",
                timed(cold, args.iterations, 3, 30), readable),
            row("evaluator", f"can_read x {len(tasks)} tasks, warm", "50 grants",
                timed(warm, args.iterations, 3, 30), readable)]


def bench_in_process(snapshot: Snapshot, policy: dict[str, Any], args: argparse.Namespace) -> list[Row]:
    rows = []
    for configuration in CONFIGURATIONS:
        app = create_app(Settings(log_level="warn", **settings_for(configuration, policy)), configure_logging=False)
        runtime_of(app).cache.replace_all(snapshot)
        client = app.test_client()
        want = expected(snapshot, policy if configuration.endswith("grants") else None)
        for (label, path), total in zip(PROBES.items(), want, strict=True):
            def call(path: str = path, client: Any = client) -> Any:
                answer = client.get(path, headers=IDENTITY_HEADERS)
                if answer.status_code != 200:
                    raise SystemExit(f"GET {path}: {answer.status_code} {answer.get_data(as_text=True)[:300]}")
                return answer
            items = check(call().get_json(), total, f"in-process {configuration} {label}")
            rows.append(row("in-process", label, configuration, timed(call, args.iterations, 10, 60), items))
            if configuration.endswith("grants"):      # right after a cache change: the subset is recomputed
                memo = memo_for(runtime_of(app).cache)

                def cold(call: Callable[[], Any] = call, memo: Any = memo) -> Any:
                    memo.clear()
                    return call()
                rows.append(row("in-process", label, configuration + ", cold", timed(cold, args.iterations, 10, 60),
                                items))
    return rows


@contextlib.contextmanager
def gunicorn(configuration: str, policy: dict[str, Any], tasks: int) -> Iterator[str]:
    """gunicorn (production settings, synthetic cache) for one configuration; the policy as a watched file."""
    with tempfile.TemporaryDirectory() as folder:
        values = settings_for(configuration, policy)
        env: dict[str, str] = {}
        if values:
            env.update(SERVICE_AUTH_MODE="headers", SERVICE_AUTH_HEADERS_SUBJECT="X-User",
                       SERVICE_AUTH_HEADERS_GROUPS="X-Groups", SERVICE_AUTH_HEADERS_EMAIL="X-Email",
                       SERVICE_TRUSTED_PROXIES="127.0.0.1/32")
        if "acl_policy" in values:
            path = Path(folder, "policy.json")
            path.write_text(values["acl_policy"])
            env["SERVICE_ACL_POLICY_FILE"] = str(path)
        with gunicorn_server(tasks, **env) as base:
            yield base


def bench_http(snapshot: Snapshot, policy: dict[str, Any], args: argparse.Namespace) -> list[Row]:
    rows = []
    tasks = len(snapshot[ResourceKind.TASK])
    for configuration in CONFIGURATIONS:
        want = expected(snapshot, policy if configuration.endswith("grants") else None)
        with gunicorn(configuration, policy, tasks) as base, requests.Session() as session:
            session.trust_env = False
            for (label, path), total in zip(PROBES.items(), want, strict=True):
                def call(url: str = base + path) -> Any:
                    answer = session.get(url, headers=IDENTITY_HEADERS, timeout=30)
                    if answer.status_code != 200:
                        raise SystemExit(f"GET {url}: {answer.status_code} {answer.text[:300]}")
                    return answer
                items = check(call().json(), total, f"http {configuration} {label}")
                rows.append(row("http", label, configuration, timed(call, args.iterations, 10, 60), items))
    return rows


# ---------------------------------------------------------------- report
def ratios(rows: list[Row]) -> list[dict[str, Any]]:
    """Policy over no policy (p50 and p99), per section and request."""
    found = []
    for section in ("in-process", "http"):
        for label in PROBES:
            by = {r.configuration: r for r in rows if r.section == section and r.measurement == label}
            base, policy, none = by.get("headers, no policy"), by.get("headers, 50 grants"), by.get("none")
            if base is None or policy is None:
                continue
            ratio = policy.p50_ms / base.p50_ms
            found.append({"section": section, "request": label, "p50_ratio": round(ratio, 3),
                          "p99_ratio": round(policy.p99_ms / base.p99_ms, 3),
                          "p50_ratio_vs_mode_none": round(policy.p50_ms / none.p50_ms, 3) if none else None,
                          "target": TARGET_RATIO, "met": ratio <= TARGET_RATIO})
    return found


def markdown(rows: list[Row], found: list[dict[str, Any]]) -> str:
    lines = ["| Section | Request | Configuration | p50 | p99 | max | Runs | Total |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {r.section} | {r.measurement} | {r.configuration} | {r.p50_ms:.2f} ms | {r.p99_ms:.2f} ms | "
              f"{r.max_ms:.2f} ms | {r.runs} | {'' if r.items is None else r.items} |" for r in rows]
    lines += ["", "| Section | Request | 50 grants / no policy (p50) | (p99) | vs mode none (p50) | <= 1.5x |",
              "|---|---|---:|---:|---:|:---:|"]
    lines += [f"| {f['section']} | {f['request']} | {f['p50_ratio']:.2f}x | {f['p99_ratio']:.2f}x | "
              f"{f['p50_ratio_vs_mode_none']:.2f}x | {'yes' if f['met'] else '**no**'} |" for f in found]
    return "\n".join(lines)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Cost of an active ACL policy on the list benchmark.")
    parser.add_argument("--quick", action="store_true", help="30 iterations per row (smoke run)")
    parser.add_argument("--iterations", type=int, default=200, help="timed requests per row (default 200)")
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--skip", action="append", default=[], choices=("evaluator", "in-process", "http"))
    args = parser.parse_args(argv)
    if args.quick:
        args.iterations = 30
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    snapshot = build_snapshot(ClusterShape(tasks=args.tasks))
    policy = fifty_grants(snapshot)
    rows: list[Row] = []
    if "evaluator" not in args.skip:
        rows += bench_evaluator(snapshot, policy, args)
    if "in-process" not in args.skip:
        rows += bench_in_process(snapshot, policy, args)
    if "http" not in args.skip:
        rows += bench_http(snapshot, policy, args)
    found = ratios(rows)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({**environment(), "tasks": args.tasks, "iterations": args.iterations,
                                   "identity": {"subject": USER, "groups": list(GROUPS), "email": EMAIL},
                                   "rows": [asdict(r) for r in rows], "ratios": found}, indent=2) + "\n")
    print(markdown(rows, found))


if __name__ == "__main__":
    main()
