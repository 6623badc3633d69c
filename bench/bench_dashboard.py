"""The dashboard's budgets (docs/dashboard.md) against the real lab engine, through a real gunicorn and Chromium.

    .venv/bin/python bench/bench_dashboard.py [--tasks 10000] [--quick] [--docker-host unix:///.../docker.sock]

The lab gets a service whose placement constraint matches no node with ``--tasks`` replicas (real pending
tasks without containers: the list pages serve 10,000+ tasks) and keeps it until the end (removed even on
failure). One gunicorn (gevent worker, ``gunicorn.conf.py``) follows the lab. Rows (n, p50, p99, max in ms):

1. server render through gunicorn, client side (keep-alive ``requests``), alternating with the JSON of the
   same URL so both see the same noise: ``/tasks?limit=50`` (a 50-row list page at 10,000 tasks),
   ``/services``, ``/`` (the overview: four panels read as the caller), a service detail;
2. headless Chromium (Debian's, Playwright): first contentful paint and "usable" (the page's module ran:
   ``html[data-ready]``) of ``/tasks?limit=50`` and ``/``, each load in a fresh context (cold cache);
3. a change on the engine (``docker config create``) until its name is visible in an open ``/configs`` page
   (no reload): the live path end to end (event → stream → fragment → DOM);
4. what a tab costs: ``shoal_open_streams`` with one open page; the bytes of all JS and CSS the pages load.

Results go to ``bench/results/dashboard.json`` and a Markdown table is printed. Every loop has a count and a
time limit; only 127.0.0.1 and the lab's unix socket are contacted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a script: `bench`

import docker
import requests

from bench.bench_engine_scale import BIG, create_big, remove_service
from bench.bench_mcp import DEFAULT_LAB_HOST, gunicorn_server
from bench.timing import percentile

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "dashboard.json"
CHROMIUM = "/usr/bin/chromium"
HTML = {"Accept": "text/html"}
JSON = {"Accept": "application/json"}


def row(name: str, samples: list[float], note: str = "") -> dict[str, Any]:
    ms = [s * 1000 for s in samples]
    return {"name": name, "n": len(ms), "p50": round(percentile(ms, 50), 2) if ms else None,
            "p99": round(percentile(ms, 99), 2) if ms else None, "max": round(max(ms), 2) if ms else None,
            "note": note}


def timed_get(session: requests.Session, url: str, headers: dict[str, str]) -> float:
    started = time.perf_counter()
    response = session.get(url, headers=headers, timeout=30)
    took = time.perf_counter() - started
    if response.status_code != 200:
        raise SystemExit(f"{url}: {response.status_code} {response.text[:300]}")
    return took


def server_renders(base: str, paths: list[str], count: int, seconds: float) -> list[dict[str, Any]]:
    rows = []
    with requests.Session() as session:
        for path in paths:
            html: list[float] = []
            json_: list[float] = []
            deadline = time.monotonic() + seconds
            for _ in range(count):
                if time.monotonic() > deadline:
                    break
                html.append(timed_get(session, base + path, HTML))
                if path != "/":   # the overview has no JSON of its own
                    json_.append(timed_get(session, base + path, JSON))
            rows.append(row(f"GET {path} text/html", html, "server render, client side"))
            if json_:
                rows.append(row(f"GET {path} JSON (same run)", json_, "the same URL's JSON, alternated"))
    return rows


def browser_loads(base: str, paths: list[str], count: int) -> list[dict[str, Any]]:
    from playwright.sync_api import sync_playwright

    rows = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            for path in paths:
                paints: list[float] = []
                usable: list[float] = []
                for _ in range(count):
                    context = browser.new_context()
                    page = context.new_page()
                    page.goto(base + path, wait_until="commit")
                    page.wait_for_selector("html[data-ready]", timeout=15_000)
                    timing = page.evaluate("""() => {
                        const paint = performance.getEntriesByName('first-contentful-paint')[0];
                        return {fcp: paint ? paint.startTime : null, ready: performance.now()};
                    }""")
                    if timing["fcp"] is not None:
                        paints.append(timing["fcp"] / 1000)
                    usable.append(timing["ready"] / 1000)
                    context.close()
                rows.append(row(f"{path} first contentful paint", paints, "Chromium, fresh context each"))
                rows.append(row(f"{path} usable (module ran)", usable, "upper bound: measured when seen"))
        finally:
            browser.close()
    return rows


def live_latency(base: str, api: docker.APIClient, count: int, seconds: float) -> tuple[dict[str, Any], int]:
    from playwright.sync_api import sync_playwright

    samples: list[float] = []
    created: list[str] = []
    streams = -1
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            page = browser.new_page()
            page.goto(base + "/configs?limit=200", wait_until="load")
            page.wait_for_function("document.getElementById('freshness')?.dataset.state === 'live'",
                                   timeout=15_000)
            time.sleep(1)   # the stream's first frames settle
            text = requests.get(base + "/-/metrics", timeout=5).text
            found = re.search(r"^shoal_open_streams (\d+)", text, re.M)
            streams = int(found.group(1)) if found else -1
            deadline = time.monotonic() + seconds
            for index in range(count):
                if time.monotonic() > deadline:
                    break
                name = f"b-dash-{int(time.time())}-{index}"
                started = time.perf_counter()
                created.append(api.create_config(name, b"x")["ID"])
                page.wait_for_function("name => document.querySelector('main').innerText.includes(name)",
                                       arg=name, timeout=10_000, polling=10)
                samples.append(time.perf_counter() - started)
                time.sleep(0.2)
        finally:
            browser.close()
            for config_id in created:
                with contextlib.suppress(docker.errors.APIError):
                    api.remove_config(config_id)
    return row("engine change → visible in an open /configs page", samples, "docker config create → DOM"), streams


def asset_bytes() -> int:
    total = 0
    for pattern in ("static/js/**/*.js", "static/css/**/*.css", "static/vendor/**/*.js", "static/vendor/**/*.css"):
        total += sum(p.stat().st_size for p in ROOT.glob(pattern))
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docker-host", default=DEFAULT_LAB_HOST)
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="fewer samples (a smoke run)")
    args = parser.parse_args()
    api = docker.APIClient(base_url=args.docker_host, timeout=120)
    n, loads, changes = (30, 3, 5) if args.quick else (300, 20, 40)
    print(f"creating {args.tasks} pending tasks ...", flush=True)
    remove_service(api, BIG)
    create_big(api, args.tasks)
    try:
        with tempfile.TemporaryDirectory() as tmp, gunicorn_server(args.docker_host, Path(tmp)) as (base, _):
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:   # the cache holds every task before measuring
                total = requests.get(base + "/tasks?limit=1", headers=JSON, timeout=10).json()["total"]
                if total >= args.tasks:
                    break
                time.sleep(0.5)
            services = requests.get(base + "/services?limit=200", headers=JSON, timeout=10).json()["items"]
            small = [s["@id"] for s in services if s["Spec"]["Name"] != BIG]   # the big one embeds every task
            detail = small[0] if small else "/services"
            print("server renders ...", flush=True)
            rows = server_renders(base, ["/tasks?limit=50", "/services", "/", detail], n, 120)
            print("browser loads ...", flush=True)
            rows += browser_loads(base, ["/tasks?limit=50", "/"], loads)
            print("live latency ...", flush=True)
            live, streams = live_latency(base, api, changes, 120)
            rows.append(live)
    finally:
        remove_service(api, BIG)
    extra = {"open_streams_one_tab": streams, "js_css_bytes": asset_bytes(), "tasks": args.tasks}
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"rows": rows, **extra}, indent=2) + "\n")
    print("| row | n | p50 ms | p99 ms | max ms | note |\n|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['name']} | {r['n']} | {r['p50']} | {r['p99']} | {r['max']} | {r['note']} |")
    print(f"\nstreams with one tab open: {streams}; JS + CSS: {extra['js_css_bytes']} bytes; tasks: {args.tasks}")


if __name__ == "__main__":
    main()
