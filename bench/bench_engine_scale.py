"""Shoal against a real engine holding 10,000 tasks: what the task poll costs the worker and the engine.

    .venv/bin/python bench/bench_engine_scale.py [--repo DIR] [--label NAME] [--tasks 10000] [--detail-seconds 70]
                                                 [--changes 20] [--keep] [--out bench/results/engine_scale.json]

Starts (or reuses) the lab ``scale`` (SHOAL_LAB_DIR=/tmp/lab-scale), removes a leftover big service, starts
gunicorn with the real watcher (as the ``server`` test fixture does; ``--repo`` runs another checkout's code,
e.g. the commit before the TaskPoller, for the baseline), measures the worker's RSS, then creates the big
service (``--tasks`` replicas whose constraint matches no node: real pending tasks without containers) and,
once the cache holds them:

1. detail latency: one keep-alive client alternating ``/tasks/{id}`` (a task of the big service) and
   ``/services/{id}`` (the small probe service: the big service's own detail embeds its 10,000 tasks,
   1.5 MB, and costs ~100 ms by itself) for ``--detail-seconds`` (longer than one full task sweep),
   p50/p99/max and the count over 50 ms;
2. the hub stall seen from inside: not measurable from outside, so (1) stands for it;
3. idle CPU over 60 s with no changes: the worker (/proc/<pid>/stat) and the lab's dockerd (its daemon
   cgroup's cpuacct.usage, dockerd + containerd; measured again with Shoal stopped, as the lab's demo
   stack keeps dockerd busy on its own); RSS of the worker in steady state, per task;
4. task-state visibility: ``--changes`` times, kill the container of a small real service's task and time
   from the engine showing the task's new state (polled directly, every 10 ms) to Shoal's ``/tasks/{id}``
   showing it (polled every 10 ms); once idle, once with 200 keep-alive clients loading lists from a
   separate process on 127.0.0.1;
5. mass changes: scale the big service ``--tasks`` → ``--tasks``/10 → ``--tasks`` and time from the engine
   settling on its new task count (listed directly every ~0.3 s, unchanged for 5 s) to Shoal's
   ``GET /tasks?filter=service == "<id>"`` showing the same ``total`` (and from the scale command), while
   the detail client runs: its requests over 50 ms there are the stalls of applying thousands of changes.

``quiet`` (in ``--phases``) measures the idle CPU again with the lab's crash-looping services
(``CHURNING``) scaled to 0 for the minute, then restores them: the cost of 10,000 tasks at rest, apart from
the restarts those services make every few seconds (each one events, inspects and listings).

``stalls_over_50ms`` sums the detail requests over 50 ms of every phase (idle, under load, mass changes).
``--phases`` runs a subset (e.g. ``detail,idle,mass``) for quicker comparisons.

Every loop is bounded; only 127.0.0.1 and the lab's unix socket are contacted. Results: JSON to ``--out``
(merged under ``--label``) and a summary on stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import docker  # noqa: E402
import requests  # noqa: E402

from bench.localhttp import free_port  # noqa: E402
from bench.processes import stop  # noqa: E402
from bench.timing import percentile  # noqa: E402

LAB_NAME = os.environ.get("SHOAL_BENCH_LAB", "scale")   # another name: another lab (benches side by side)
LAB_DIR = f"/tmp/lab-{LAB_NAME}"
BIG = "shoal-scale-big"
CHURNING = ("demo_crasher", "ops_sick")   # the lab's services that restart a task every few seconds
PROBE = "shoal-scale-probe"


# ------------------------------------------------------------------------------------------- the lab
def lab_up() -> str:
    env = {**os.environ, "SHOAL_LAB_DIR": LAB_DIR}
    out = subprocess.run([str(REPO / "scripts" / "lab-swarm"), "up", "--name", LAB_NAME], env=env,
                         capture_output=True, text=True, timeout=600, check=True).stdout
    return [line.split("=", 1)[1] for line in out.splitlines() if line.startswith("DOCKER_HOST=")][-1]


def daemon_cgroup() -> Path:
    matches = sorted(Path("/sys/fs/cgroup/cpuacct/shoal-lab").glob(f"*-{LAB_NAME}/n1/daemon"))
    if not matches:
        raise SystemExit("the lab's daemon cgroup was not found")
    return matches[0]


def remove_service(api: docker.APIClient, name: str, timeout: float = 120) -> None:
    services = [s for s in api.services(filters={"name": name}) if s["Spec"]["Name"] == name]
    if not services:
        return
    sid = services[0]["ID"]
    api.remove_service(sid)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(t["ServiceID"] == sid for t in api.tasks()):
        time.sleep(1)


def create_big(api: docker.APIClient, replicas: int) -> str:
    spec = docker.types.TaskTemplate(
        container_spec=docker.types.ContainerSpec("local/busybox:latest", ["sleep", "1000000"]),
        placement=docker.types.Placement(constraints=["node.labels.nonexistent==1"]))
    created = api.create_service(spec, name=BIG, mode=docker.types.ServiceMode("replicated", replicas=replicas))
    sid = str(created["ID"])
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if len(api.tasks(filters={"service": sid})) >= replicas:
            return sid
        time.sleep(1)
    raise SystemExit("the big service's tasks did not all appear within 300 s")


def create_probe(api: docker.APIClient) -> str:
    existing = api.services(filters={"name": PROBE})
    if existing:
        return str(existing[0]["ID"])
    spec = docker.types.TaskTemplate(
        container_spec=docker.types.ContainerSpec("local/busybox:latest", ["sleep", "1000000"], init=True,
                                                  stop_grace_period=1_000_000_000),
        restart_policy=docker.types.RestartPolicy("any", delay=0))
    created = api.create_service(spec, name=PROBE, mode=docker.types.ServiceMode("replicated", replicas=1),
                                 endpoint_spec=docker.types.EndpointSpec(mode="dnsrr"))
    return str(created["ID"])


def running_task(api: docker.APIClient, service_id: str, timeout: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for task in api.tasks(filters={"service": service_id, "desired-state": "running"}):
            if task["Status"]["State"] == "running" and task["Status"].get("ContainerStatus", {}).get("ContainerID"):
                return dict(task)
        time.sleep(0.1)
    raise SystemExit("the probe service has no running task")


# ------------------------------------------------------------------------------------------- the server
def start_server(repo: Path, host: str, log_path: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    env = {**os.environ, "SERVICE_DOCKER_HOST": host, "SERVICE_LISTEN_ADDR": f"127.0.0.1:{port}",
           "SERVICE_LOG_LEVEL": "info", "PYTHONPATH": str(repo),
           "SERVICE_DATA_DIR": ":memory:"}
    env.pop("SERVICE_CONFIG", None)
    with log_path.open("w") as log:
        proc = subprocess.Popen([str(REPO / ".venv" / "bin" / "gunicorn"), "-c", "gunicorn.conf.py", "wsgi:app"],
                                cwd=repo, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if requests.get(f"{base}/-/ready", timeout=2).status_code == 200:
                return proc, base
        except requests.RequestException:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"gunicorn did not become ready:\n{log_path.read_text()[-3000:]}")


def worker_pid(master: int) -> int:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    if len(children) != 1:
        raise SystemExit(f"expected one gunicorn worker, found {children}")
    return int(children[0])


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def state_of(body: dict[str, Any]) -> str | None:
    task = body.get("task") or body
    status = task.get("Status") or {}
    state = status.get("State") or status.get("state") if isinstance(status, dict) else None
    return state if isinstance(state, str) else None


# ------------------------------------------------------------------------------------------- measurements
def stats(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {}
    return {"n": len(samples), "p50_ms": round(percentile(samples, 50) * 1000, 1),
            "p99_ms": round(percentile(samples, 99) * 1000, 1), "max_ms": round(max(samples) * 1000, 1)}


def detail_latency(base: str, task_id: str, service_id: str, seconds: float,
                   stop: threading.Event | None = None) -> dict[str, Any]:
    """``seconds`` of alternating detail requests (with ``stop``: until it is set, at most 600 s)."""
    session = requests.Session()
    samples: list[float] = []
    urls = [f"{base}/tasks/{task_id}", f"{base}/services/{service_id}"]
    deadline = time.monotonic() + (600 if stop is not None else seconds)
    i = 0
    while time.monotonic() < deadline and i < 1_000_000 and not (stop is not None and stop.is_set()):
        started = time.monotonic()
        try:
            response = session.get(urls[i % 2], timeout=10)
        except requests.RequestException:  # counted at the timeout
            samples.append(time.monotonic() - started)
            i += 1
            continue
        samples.append(time.monotonic() - started)
        if response.status_code == 404 and stop is not None:   # the task was removed by a scale-down
            i += 1
            continue
        if response.status_code != 200:
            raise SystemExit(f"{urls[i % 2]} answered {response.status_code}")
        i += 1
        time.sleep(0.01)
    return {**stats(samples), "over_50ms": sum(s > 0.05 for s in samples)}


def idle_cpu(pid: int, cgroup: Path, seconds: float = 60) -> dict[str, float]:
    usage = cgroup / "cpuacct.usage"
    w0, d0, t0 = cpu_seconds(pid), int(usage.read_text()), time.monotonic()
    time.sleep(seconds)
    w1, d1, t1 = cpu_seconds(pid), int(usage.read_text()), time.monotonic()
    return {"worker_pct_core": round(100 * (w1 - w0) / (t1 - t0), 2),
            "dockerd_pct_core": round(100 * (d1 - d0) / 1e9 / (t1 - t0), 2), "seconds": round(t1 - t0, 1)}


def visibility(api: docker.APIClient, base: str, probe: str, changes: int) -> dict[str, Any]:
    """Kill the probe's container; time engine state change → Shoal showing the same state."""
    session = requests.Session()
    lags: list[float] = []
    misses = 0
    for _ in range(changes):
        task = running_task(api, probe)
        task_id, container = task["ID"], task["Status"]["ContainerStatus"]["ContainerID"]
        seen: dict[str, float] = {}

        def watch_engine(task_id: str = task_id, seen: dict[str, float] = seen) -> None:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                state = api.inspect_task(task_id)["Status"]["State"]
                if state != "running":
                    seen["engine"], seen["state"] = time.monotonic(), state  # type: ignore[assignment]
                    return
                time.sleep(0.01)

        watcher = threading.Thread(target=watch_engine)
        watcher.start()
        api.kill(container)
        watcher.join(35)
        if "engine" not in seen:
            misses += 1
            continue
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                response = session.get(f"{base}/tasks/{task_id}", timeout=10)
            except requests.RequestException:
                continue
            if response.status_code == 200 and state_of(response.json()) not in (None, "running"):
                lags.append(max(0.0, time.monotonic() - seen["engine"]))
                break
            time.sleep(0.01)
        else:
            misses += 1
    return {**stats(lags), "misses": misses}


def scale_named(api: docker.APIClient, names: tuple[str, ...] | dict[str, int], replicas: int | None = None
                ) -> dict[str, int]:
    """Scale the named replicated services (to ``replicas``, or each to its value in ``names``); returns
    their replicas before."""
    before: dict[str, int] = {}
    for service in api.services():
        name = service["Spec"]["Name"]
        mode = service["Spec"].get("Mode", {}).get("Replicated")
        if name not in names or mode is None:
            continue
        before[name] = int(mode.get("Replicas", 0))
        target = names[name] if isinstance(names, dict) else replicas
        api.update_service(service["ID"], version=service["Version"]["Index"], fetch_current_spec=True,
                           mode=docker.types.ServiceMode("replicated", replicas=target))
    return before


def engine_task_count(api: docker.APIClient, service_id: str) -> int:
    """The engine's task count of the service, counted in the raw body: decoding 6.8 MB here held this
    process's GIL ~150 ms, which the detail thread beside it then reported as Shoal's latency."""
    response = api._get(api._url("/tasks"), params={"filters": json.dumps({"service": [service_id]})})
    api._raise_for_status(response)
    return response.content.count(b'"ServiceID":')


def shoal_task_total(session: requests.Session, base: str, service_id: str) -> int | None:
    try:
        response = session.get(f"{base}/tasks", params={"filter": f'service == "{service_id}"', "limit": 1},
                               timeout=10)
    except requests.RequestException:
        return None
    return int(response.json()["total"]) if response.status_code == 200 else None


def run_start(samples: list[tuple[float, int]]) -> float:
    """When the samples' last value began its current run (the engine's count settled there)."""
    start = samples[-1][0]
    for at, value in reversed(samples):
        if value != samples[-1][1]:
            break
        start = at
    return start


def mass_change(api: docker.APIClient, base: str, service_id: str, replicas: int, detail: tuple[str, str],
                settle_s: float = 5.0, timeout: float = 240.0) -> dict[str, Any]:
    """Scale ``service_id`` to ``replicas``; time the engine settling and Shoal matching its task count."""
    spec = api.inspect_service(service_id)
    t0 = time.monotonic()
    api.update_service(service_id, version=spec["Version"]["Index"], fetch_current_spec=True,
                       mode=docker.types.ServiceMode("replicated", replicas=replicas))
    shoal: list[tuple[float, int | None]] = []   # (time, Shoal's total), every ~20 ms
    stop = threading.Event()
    latencies: dict[str, Any] = {}

    def watch_shoal() -> None:
        session = requests.Session()
        while not stop.is_set() and time.monotonic() - t0 < timeout + 120:
            shoal.append((time.monotonic(), shoal_task_total(session, base, service_id)))
            time.sleep(0.02)

    def details() -> None:
        latencies.update(detail_latency(base, detail[0], detail[1], 0, stop=stop))

    threads = [threading.Thread(target=watch_shoal), threading.Thread(target=details)]
    for thread in threads:
        thread.start()
    try:
        engine: list[tuple[float, int]] = []
        engine_at = t0
        while time.monotonic() - t0 < timeout:
            engine.append((time.monotonic(), engine_task_count(api, service_id)))
            engine_at = run_start(engine)
            moved = any(n != engine[0][1] for _, n in engine)
            if engine[-1][0] - engine_at >= settle_s and (moved or engine[-1][0] - t0 >= 60):
                break
            time.sleep(0.2)
        final = engine[-1][1]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (shoal and shoal[-1][1] == final):
            time.sleep(0.05)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    last_differing = max((t for t, n in shoal if n != final), default=t0)
    matched = [t for t, n in shoal if n == final and t > last_differing]
    shoal_at = matched[0] if matched else None
    return {"replicas": replicas, "engine_final_tasks": final,
            "engine_settled_s": round(engine_at - t0, 2),
            "shoal_matched_s": None if shoal_at is None else round(shoal_at - t0, 2),
            "visibility_after_engine_s": None if shoal_at is None else round(max(0.0, shoal_at - engine_at), 2),
            "detail": latencies}


LOAD_SCRIPT = r"""
import sys, time, gevent
from gevent import monkey; monkey.patch_all()
import http.client
base_port, clients, seconds = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
paths = ["/services", "/tasks?limit=50", "/nodes", "/tasks?limit=20&offset=100"]
done = [0]
def client(i):
    conn = http.client.HTTPConnection("127.0.0.1", base_port, timeout=30)
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline and n < 1_000_000:
        try:
            conn.request("GET", paths[(i + n) % len(paths)]); conn.getresponse().read()
            done[0] += 1
        except Exception:
            conn.close(); conn = http.client.HTTPConnection("127.0.0.1", base_port, timeout=30)
            gevent.sleep(0.1)
        n += 1
gevent.joinall([gevent.spawn(client, i) for i in range(clients)])
print(done[0])
"""


def with_load(base: str, clients: int, seconds: float) -> subprocess.Popen[str]:
    port = base.rsplit(":", 1)[1]
    return subprocess.Popen([str(REPO / ".venv" / "bin" / "python"), "-c", LOAD_SCRIPT, port, str(clients),
                             str(seconds)], stdout=subprocess.PIPE, text=True)


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


# ------------------------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repo", type=Path, default=REPO, help="checkout whose app/ gunicorn runs")
    parser.add_argument("--label", default="current")
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--detail-seconds", type=float, default=65)
    parser.add_argument("--idle-seconds", type=float, default=60)
    parser.add_argument("--changes", type=int, default=20)
    parser.add_argument("--load-clients", type=int, default=200)
    parser.add_argument("--phases", default="detail,idle,quiet,visibility,load,mass",
                        help="comma-separated subset of detail,idle,quiet,visibility,load,mass")
    parser.add_argument("--keep", action="store_true", help="leave the big service in place")
    parser.add_argument("--reuse", action="store_true", help="reuse an existing big service (no RSS baseline)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "engine_scale.json")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the clean-up (server, services) on kill

    host = lab_up()
    api = docker.APIClient(base_url=host, version="1.41", timeout=120)
    cgroup = daemon_cgroup()
    result: dict[str, Any] = {"label": args.label, "repo": str(args.repo), "tasks": args.tasks,
                              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                              "loadavg_start": loadavg(), "cpus": os.cpu_count()}
    try:
        measure(args, host, api, cgroup, result)
    finally:
        save(args.out, args.label, result)
    print(json.dumps(result, indent=2))


def measure(args: argparse.Namespace, host: str, api: docker.APIClient, cgroup: Path,
            result: dict[str, Any]) -> None:
    existing = api.services(filters={"name": BIG})
    if existing and not args.reuse:
        print("removing the leftover big service", flush=True)
        remove_service(api, BIG)
    probe = create_probe(api)
    running_task(api, probe)
    log_path = Path(f"{LAB_DIR}/bench-{args.label}.log")
    proc, base = start_server(args.repo, host, log_path)
    try:
        pid = worker_pid(proc.pid)
        time.sleep(3)
        result["rss_baseline_mb"] = round(rss_bytes(pid) / 2**20, 1)
        print(f"server {base} worker {pid}; baseline RSS {result['rss_baseline_mb']} MB", flush=True)
        if not (existing and args.reuse):
            t0 = time.monotonic()
            big = create_big(api, args.tasks)
            result["big_created_s"] = round(time.monotonic() - t0, 1)
        else:
            big = str(existing[0]["ID"])
        big_task = api.tasks(filters={"service": big})[0]["ID"]
        deadline = time.monotonic() + 120
        while requests.get(f"{base}/tasks/{big_task}", timeout=10).status_code != 200:
            if time.monotonic() > deadline:
                raise SystemExit("Shoal never showed the big service's tasks")
            time.sleep(0.5)
        time.sleep(5)
        phases = set(args.phases.split(","))
        print("cache holds the big service; measuring", sorted(phases), flush=True)
        if "detail" in phases:
            result["detail"] = detail_latency(base, big_task, probe, args.detail_seconds)
            print("detail", result["detail"], flush=True)
        if "idle" in phases:
            result["loadavg_idle"] = loadavg()
            result["idle_cpu"] = idle_cpu(pid, cgroup, args.idle_seconds)
            result["rss_steady_mb"] = round(rss_bytes(pid) / 2**20, 1)
            result["rss_per_task_kb"] = round((result["rss_steady_mb"] - result["rss_baseline_mb"]) * 1024
                                              / args.tasks, 2)
            print("idle", result["idle_cpu"], "rss", result["rss_steady_mb"], flush=True)
        if "quiet" in phases:
            saved = scale_named(api, CHURNING, 0)
            try:
                time.sleep(15)   # their last tasks stop and are listed
                result["idle_cpu_quiet"] = idle_cpu(pid, cgroup, args.idle_seconds)
                print("idle, churning services at 0", result["idle_cpu_quiet"], flush=True)
            finally:
                scale_named(api, saved)
        if "visibility" in phases:
            result["visibility_idle"] = visibility(api, base, probe, args.changes)
            print("visibility idle", result["visibility_idle"], flush=True)
        if "load" in phases:
            load = with_load(base, args.load_clients, 3600)
            try:
                time.sleep(3)
                result["loadavg_load"] = loadavg()
                result["visibility_load"] = visibility(api, base, probe, args.changes)
                print("visibility under load", result["visibility_load"], flush=True)
                result["detail_load"] = detail_latency(base, big_task, probe, 15)
            finally:
                load.kill()
                load.wait(10)
        if "mass" in phases:
            small = max(1, args.tasks // 10)
            result["mass_down"] = mass_change(api, base, big, small, (big_task, probe))
            print("mass change down", result["mass_down"], flush=True)
            kept = api.tasks(filters={"service": big, "desired-state": "running"})
            result["mass_up"] = mass_change(api, base, big, args.tasks, (kept[0]["ID"] if kept else big_task, probe))
            print("mass change up", result["mass_up"], flush=True)
        result["stalls_over_50ms"] = sum(int((result.get(phase) or {}).get("over_50ms", 0)) for phase in
                                         ("detail", "detail_load")) + sum(
            int(((result.get(phase) or {}).get("detail") or {}).get("over_50ms", 0))
            for phase in ("mass_down", "mass_up"))
        result["rss_end_mb"] = round(rss_bytes(pid) / 2**20, 1)
    finally:
        stop(proc)
    try:
        # The same idle minute with Shoal stopped: what dockerd spends on the lab's own workload.
        usage = cgroup / "cpuacct.usage"
        d0, t0 = int(usage.read_text()), time.monotonic()
        time.sleep(args.idle_seconds)
        result["dockerd_pct_core_without_shoal"] = round(
            100 * (int(usage.read_text()) - d0) / 1e9 / (time.monotonic() - t0), 2)
        result["loadavg_end"] = loadavg()
    finally:
        if not args.keep:
            remove_service(api, BIG)
            remove_service(api, PROBE)


def save(out: Path, label: str, result: dict[str, Any]) -> None:
    """Merge this run (complete or not) into the results file under its label."""
    previous = json.loads(out.read_text()) if out.exists() else {}
    previous[label] = result
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(previous, indent=2) + "\n")


if __name__ == "__main__":
    main()
