"""Measure the performance figures (docs/figures.md) and print them as a Markdown table.

    .venv/bin/python bench/bench_api.py [--quick] [--docker-host unix:///tmp/shoal-lab/shoal.sock]

Sections (each row: median and p95 over many runs, after warm-up):
  a. in-process: Flask test client against a cache filled with a synthetic cluster (10k and 50k tasks);
     isolates the application's own cost from sockets and the gevent server.
  b. over HTTP: the same requests against gunicorn with the production gevent settings
     (``bench/gunicorn_synthetic.py``), through one keep-alive ``requests.Session``; the targets.
  c. memory: bytes per cached task, in a fresh process (``bench/memory_probe.py``).
  d. the lab swarm, when an engine is reachable: ``Watcher.full_sync`` duration, and the same task list
     answered by the engine (list + filter in Python) versus by the cache.
Results also go to ``bench/results/latest.json``. Only 127.0.0.1 and local unix sockets are contacted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: `app`, `bench`

import requests

from app import create_app
from app.cache.entries import Raw
from app.config import Settings
from app.resources import ResourceKind
from app.runtime import runtime_of
from bench.localhttp import free_port
from bench.synthetic import ClusterShape, Snapshot, build_snapshot
from bench.timing import Budget, Stats, measure

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "latest.json"
FILTER = 'state == "running" && slot > 1'
LIST_QUERY = urlencode({"filter": FILTER, "sort": "state", "limit": "50"}, quote_via=quote)
DEFAULT_LAB_HOST = "unix:///tmp/shoal-lab/shoal/n1/docker.sock"  # what `scripts/lab-swarm env` prints
SERVER_START_TIMEOUT = 180.0   # building 50k tasks inside the worker takes a while
SERVER_STOP_TIMEOUT = 20.0
# Performance targets: (section, measurement, tasks or None for any) → bound on the median.
TARGETS: dict[tuple[str, str, int | None], float] = {
    ("http", "filtered+sorted page", 10_000): 15.0,
    ("http", "filtered+sorted page", 50_000): 60.0,
    ("http", "task detail", None): 3.0,
    ("memory", "cached bytes per task (RSS)", None): 30.0,
    ("engine", "Watcher.full_sync()", None): 1000.0,
}


# ---------------------------------------------------------------- results
@dataclass(slots=True)
class Row:
    """One line of the table; ``median``/``p95`` are in ``unit``, the target bounds the median."""

    section: str
    measurement: str
    dataset: str
    median: float
    p95: float | None
    runs: int
    unit: str = "ms"
    tasks: int | None = None
    target: float | None = None
    met: bool | None = None

    def __post_init__(self) -> None:
        self.target = _target_for(self.section, self.measurement, self.tasks)
        self.met = None if self.target is None else self.median <= self.target


def _target_for(section: str, measurement: str, tasks: int | None) -> float | None:
    return TARGETS.get((section, measurement, tasks), TARGETS.get((section, measurement, None)))


def timing_row(section: str, measurement: str, tasks: int, stats: Stats, dataset: str = "") -> Row:
    return Row(section, measurement, dataset or f"{tasks // 1000}k tasks", stats.median_ms, stats.p95_ms,
               stats.runs, tasks=tasks)


@dataclass(slots=True)
class Report:
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- plan
@dataclass(frozen=True, slots=True)
class Plan:
    """What to run: ``--quick`` is a smoke run (10k only, few iterations), the default is the full set."""

    task_counts: tuple[int, ...]
    budget: Budget
    slow_budget: Budget          # for the 50k list requests, which may take tens of ms each
    memory_tasks: int
    sync_runs: int
    docker_host: str | None
    lab_replicas: int = 0

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Plan:
        if args.quick:
            quick = Budget(iterations=30, warmup=3, max_seconds=10, minimum=10)
            return cls((10_000,), quick, quick, 10_000, 5, args.docker_host, args.lab_replicas)
        return cls((10_000, 50_000), Budget(iterations=args.iterations),
                   Budget(iterations=args.iterations, max_seconds=90, minimum=50), 50_000, 20,
                   args.docker_host, args.lab_replicas)

    def budget_for(self, tasks: int, label: str) -> Budget:
        return self.slow_budget if tasks >= 50_000 and label != "task detail" else self.budget


# ---------------------------------------------------------------- requests
@dataclass(frozen=True, slots=True)
class Probe:
    label: str
    path: str


def probes(task_id: str) -> list[Probe]:
    """The four measured requests, in table order."""
    return [Probe("filtered+sorted page", f"/tasks?{LIST_QUERY}"),
            Probe("task detail", f"/tasks/{task_id}"),
            Probe("first page, no filter", "/tasks"),
            Probe("services sorted by name", "/services?sort=name")]


def detail_id(snapshot: Snapshot) -> str:
    """A running task from the middle of the listing (not the first one, to avoid any lucky ordering)."""
    tasks = snapshot[ResourceKind.TASK]
    running = [t for t in tasks[len(tasks) // 2:] if t["Status"]["State"] == "running"]
    return str(running[0]["ID"])


def expected_total(tasks: list[Raw]) -> int:
    return sum(1 for t in tasks if t["Status"]["State"] == "running" and int(t.get("Slot") or 0) > 1)


def check_list_answer(body: dict[str, Any], tasks: list[Raw]) -> None:
    """Refuse to report timings of a filter that answers wrongly (they would be meaningless)."""
    items, want = body["items"], expected_total(tasks)
    wrong = [i["ID"] for i in items if i["Status"]["State"] != "running" or int(i.get("Slot") or 0) <= 1]
    if body["total"] != want or wrong or len(items) != min(50, want):
        raise SystemExit(f"filtered list is wrong: total {body['total']} (expected {want}), "
                         f"{len(items)} items, {len(wrong)} not matching")


# ---------------------------------------------------------------- a. in-process
def loaded_app(snapshot: Snapshot | None = None, docker_host: str | None = None) -> Any:
    """A Flask app as production builds it, its cache filled directly; the watcher is never started."""
    settings = Settings(log_level="warn", docker_host=docker_host or Settings().docker_host)
    app = create_app(settings, configure_logging=False)
    if snapshot is not None:
        runtime_of(app).cache.replace_all(snapshot)
    return app


def in_process_get(client: Any, path: str) -> Callable[[], Any]:
    def call() -> Any:
        response = client.get(path)
        if response.status_code != 200:
            raise SystemExit(f"GET {path}: {response.status_code} {response.get_data(as_text=True)[:300]}")
        return response
    return call


def bench_in_process(plan: Plan, tasks: int, snapshot: Snapshot, report: Report) -> None:
    client = loaded_app(snapshot).test_client()
    check_list_answer(in_process_get(client, probes("")[0].path)().get_json(), snapshot[ResourceKind.TASK])
    for probe in probes(detail_id(snapshot)):
        stats = measure(in_process_get(client, probe.path), plan.budget_for(tasks, probe.label))
        report.rows.append(timing_row("in-process", probe.label, tasks, stats))
        _progress(report.rows[-1])


# ---------------------------------------------------------------- b. HTTP
@contextlib.contextmanager
def gunicorn_server(tasks: int, **extra_env: str) -> Iterator[str]:
    """Start gunicorn (gevent worker, synthetic cache) on a free local port; always stop it again."""
    port = free_port()
    env = {**os.environ, "BENCH_TASKS": str(tasks), "SERVICE_LISTEN_ADDR": f"127.0.0.1:{port}",
           "SERVICE_LOG_LEVEL": "warn", **extra_env}
    env.pop("SERVICE_CONFIG", None)
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "bench/gunicorn_synthetic.py", "wsgi:app"],
            cwd=ROOT, env=env, stdout=log, stderr=log, start_new_session=True)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_until_healthy(base, process, log)
            yield base
        finally:
            stop_server(process)


def wait_until_healthy(base: str, process: subprocess.Popen[bytes], log: Any) -> None:
    """Poll /-/health until the synthetic sync is in (status ok); fail early if gunicorn exits."""
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    with requests.Session() as session:
        session.trust_env = False  # never route 127.0.0.1 through a proxy from the environment
        while time.monotonic() < deadline:
            if process.poll() is not None:
                log.seek(0)
                raise SystemExit(f"gunicorn exited with {process.returncode}:\n{log.read().decode()[-3000:]}")
            with contextlib.suppress(requests.RequestException):
                answer = session.get(f"{base}/-/health", timeout=2)
                if answer.status_code == 200 and answer.json().get("status") == "ok":
                    return
            time.sleep(0.2)
    raise SystemExit(f"gunicorn did not become healthy within {SERVER_START_TIMEOUT:.0f} s")


def stop_server(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (graceful), then SIGKILL to the process group we created, each with a bounded wait."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=SERVER_STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=5)


def http_get(session: requests.Session, url: str) -> Callable[[], Any]:
    def call() -> Any:
        response = session.get(url, timeout=30)
        if response.status_code != 200:
            raise SystemExit(f"GET {url}: {response.status_code} {response.text[:300]}")
        return response
    return call


def bench_http(plan: Plan, tasks: int, snapshot: Snapshot, report: Report) -> None:
    with gunicorn_server(tasks) as base, requests.Session() as session:
        session.trust_env = False
        check_list_answer(http_get(session, base + probes("")[0].path)().json(), snapshot[ResourceKind.TASK])
        for probe in probes(detail_id(snapshot)):
            stats = measure(http_get(session, base + probe.path), plan.budget_for(tasks, probe.label))
            report.rows.append(timing_row("http", probe.label, tasks, stats))
            _progress(report.rows[-1])


# ---------------------------------------------------------------- c. memory
def run_memory_probe(tasks: int, method: str) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "memory_probe.py"), "--tasks", str(tasks), "--method", method],
        cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
    if completed.returncode != 0:
        raise SystemExit(f"memory probe failed:\n{completed.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    return result


def bench_memory(plan: Plan, report: Report) -> None:
    tasks, dataset = plan.memory_tasks, f"{plan.memory_tasks // 1000}k tasks"
    rss, traced = run_memory_probe(tasks, "rss"), run_memory_probe(tasks, "tracemalloc")
    report.details["memory"] = {"rss": rss, "tracemalloc": traced}
    report.rows += [
        Row("memory", "engine JSON per task", dataset, rss["json_bytes_per_task"] / 1024, None, 1,
            "KB/task", tasks),
        Row("memory", "cached bytes per task (RSS)", dataset, rss["bytes_per_task"] / 1024, None, 1,
            "KB/task", tasks),
        Row("memory", "cached bytes per task (tracemalloc)", dataset, traced["bytes_per_task"] / 1024, None,
            1, "KB/task", tasks),
    ]
    for row in report.rows[-3:]:
        _progress(row)


# ---------------------------------------------------------------- d. engine
def resolve_docker_host(explicit: str | None) -> str | None:
    """--docker-host, then $DOCKER_HOST, then what ``scripts/lab-swarm env`` prints, then the lab default."""
    candidates = [explicit, os.environ.get("DOCKER_HOST"), lab_env_host(), DEFAULT_LAB_HOST]
    return next((host for host in candidates if host), None)


def lab_env_host() -> str | None:
    script = ROOT / "scripts" / "lab-swarm"
    if not script.exists():
        return None
    try:
        completed = subprocess.run([str(script), "env"], capture_output=True, text=True, timeout=30,
                                   check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [line for line in completed.stdout.splitlines() if line.startswith("DOCKER_HOST=")]
    return lines[-1].split("=", 1)[1].strip() if completed.returncode == 0 and lines else None


def is_local(host: str) -> bool:
    """Only a unix socket or a loopback TCP engine: this benchmark never leaves the machine."""
    if host.startswith("unix://"):
        return True
    return any(host.startswith(f"{scheme}://{name}") for scheme in ("tcp", "http")
               for name in ("127.0.0.1:", "localhost:"))


def engine_client(host: str) -> Any:
    import docker

    return docker.APIClient(base_url=host, version="1.41", timeout=10)


def reachable(host: str) -> bool:
    if host.startswith("unix://") and not Path(host.removeprefix("unix://")).exists():
        return False
    try:
        client = engine_client(host)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # any failure means "no engine here"; the section is skipped, not failed
        return False


def engine_query(client: Any) -> Callable[[], list[Raw]]:
    """The task list the cache answers, computed from the engine: list, filter, sort by state, page."""
    rank = {"running": 0, "new": 1, "pending": 1, "assigned": 1, "accepted": 1, "preparing": 1,
            "ready": 1, "starting": 1}

    def call() -> list[Raw]:
        tasks = client.tasks()
        chosen = [t for t in tasks if t["Status"]["State"] == "running" and int(t.get("Slot") or 0) > 1]
        chosen.sort(key=lambda t: (rank.get(t["Status"]["State"], 2), t["Status"]["State"]))
        return chosen[:50]
    return call


@contextlib.contextmanager
def lab_scaled(host: str, replicas: int) -> Iterator[None]:
    """Temporarily add ``replicas`` sleeping tasks to the lab, so the engine comparison is not made on a
    couple of dozen tasks only. Bounded: gives up after 10 minutes; always removes the service."""
    if replicas <= 0:
        yield
        return
    import docker

    client = docker.DockerClient(base_url=host, version="1.41", timeout=60)
    service = client.services.create(
        "local/busybox:latest", ["sleep", "1000000"], name=f"bench-scale-{os.getpid()}", init=True,
        stop_grace_period=1_000_000_000, mode=docker.types.ServiceMode("replicated", replicas=replicas),
        endpoint_spec=docker.types.EndpointSpec(mode="dnsrr"), labels={"shoal.bench": "1"})
    try:
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            running = sum(1 for t in client.api.tasks(filters={"service": service.id})
                          if t["Status"]["State"] == "running")
            print(f"# lab scale-up: {running}/{replicas} tasks running", file=sys.stderr)
            if running >= replicas:
                break
            time.sleep(5)
        yield
    finally:
        service.remove()
        client.close()


def bench_engine(plan: Plan, report: Report) -> None:
    host = resolve_docker_host(plan.docker_host)
    if host is None or not is_local(host) or not reachable(host):
        report.notes.append(f"Engine section skipped: no reachable local engine (tried {host!r}); start one "
                            "with `scripts/lab-swarm up` or pass --docker-host.")
        return
    with lab_scaled(host, plan.lab_replicas):
        _bench_engine_on(plan, report, host)


def _bench_engine_on(plan: Plan, report: Report, host: str) -> None:
    app = loaded_app(docker_host=host)
    watcher = runtime_of(app).watcher
    durations = []
    for _ in range(plan.sync_runs):
        started = time.perf_counter()
        watcher.full_sync()
        durations.append(time.perf_counter() - started)
    watcher.client.close()
    tasks = runtime_of(app).cache.count(ResourceKind.TASK)
    dataset = f"lab: {tasks} tasks"
    report.rows.append(timing_row("engine", "Watcher.full_sync()", tasks, Stats.of(durations), dataset))
    _progress(report.rows[-1])
    compare_engine_and_cache(plan, app, host, tasks, dataset, report)
    report.details["engine"] = {"docker_host": host, "tasks": tasks,
                                "first_full_sync_ms": durations[0] * 1000}


def compare_engine_and_cache(plan: Plan, app: Any, host: str, tasks: int, dataset: str,
                             report: Report) -> None:
    """Same answer two ways: what a client pays without Shoal (engine round trip) versus with it."""
    client = engine_client(host)
    try:
        engine = measure(engine_query(client), plan.budget)
    finally:
        client.close()
    cache = measure(in_process_get(app.test_client(), probes("")[0].path), plan.budget)
    report.rows.append(timing_row("engine", "filtered page: engine list + Python filter", tasks, engine,
                                  dataset))
    report.rows.append(timing_row("engine", "filtered page: cache (in-process)", tasks, cache, dataset))
    report.rows.append(Row("engine", "ratio engine / cache (median)", dataset,
                           engine.median_ms / cache.median_ms, None, cache.runs,
                           "x", tasks))
    for row in report.rows[-3:]:
        _progress(row)


# ---------------------------------------------------------------- output
_SECTIONS = {"in-process": "in-process (test client)", "http": "HTTP (gunicorn, gevent)", "memory": "memory",
             "engine": "lab swarm"}


def _value(value: float | None, unit: str) -> str:
    if value is None:
        return "—"
    if unit == "x":
        return f"x{value:.1f}"
    return f"{value:.2f} {unit}" if value < 10 else f"{value:.1f} {unit}"


def markdown(report: Report) -> str:
    lines = ["| Section | Measurement | Dataset | Median | p95 | Runs | Target (median) | Met |",
             "|---|---|---|---:|---:|---:|---:|:---:|"]
    order = list(_SECTIONS)
    for row in sorted(report.rows, key=lambda r: order.index(r.section)):  # stable: keeps 10k before 50k
        target = "" if row.target is None else f"≤ {_value(row.target, row.unit)}"
        met = "" if row.met is None else ("yes" if row.met else "**no**")
        lines.append(f"| {_SECTIONS[row.section]} | {row.measurement} | {row.dataset} | "
                     f"{_value(row.median, row.unit)} | {_value(row.p95, row.unit)} | {row.runs} | "
                     f"{target} | {met} |")
    return "\n".join(lines + [""] + [f"_{note}_" for note in report.notes])


def environment() -> dict[str, Any]:
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True, check=False, timeout=10).stdout.strip()
    return {"generated_at": datetime.now(UTC).isoformat(timespec="seconds"), "git_commit": commit,
            "python": platform.python_version(), "platform": platform.platform(),
            "cpus": os.cpu_count(), "load_average": os.getloadavg()}


def write_json(report: Report, plan: Plan) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    document = {**environment(), "plan": {"task_counts": plan.task_counts, "budget": asdict(plan.budget)},
                "rows": [asdict(row) for row in report.rows], "notes": report.notes, **report.details}
    RESULTS.write_text(json.dumps(document, indent=2) + "\n")


def _progress(row: Row) -> None:
    print(f"  {row.section:<10} {row.measurement:<40} {row.dataset:<14} median {_value(row.median, row.unit)}"
          f"  p95 {_value(row.p95, row.unit)}  ({row.runs} runs)", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- main
def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Shoal API benchmarks (prints a Markdown table).")
    parser.add_argument("--quick", action="store_true", help="10k tasks only, few iterations (smoke run)")
    parser.add_argument("--iterations", type=int, default=200, help="timed requests per row (default 200)")
    parser.add_argument("--docker-host", help="engine for the lab section (default: $DOCKER_HOST, the lab)")
    parser.add_argument("--lab-replicas", type=int, default=0,
                        help="add a service with this many sleeping tasks to the lab for the engine section")
    parser.add_argument("--skip", action="append", default=[],
                        choices=("in-process", "http", "memory", "engine"), help="leave a section out")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    plan, report = Plan.from_args(args), Report()
    for tasks in plan.task_counts:
        snapshot = build_snapshot(ClusterShape(tasks=tasks))
        if "in-process" not in args.skip:
            bench_in_process(plan, tasks, snapshot, report)
        if "http" not in args.skip:
            bench_http(plan, tasks, snapshot, report)
    if "memory" not in args.skip:
        bench_memory(plan, report)
    if "engine" not in args.skip:
        bench_engine(plan, report)
    write_json(report, plan)
    print(markdown(report))


if __name__ == "__main__":
    main()
