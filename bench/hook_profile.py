"""Where a request spends the worker's time, hook by hook: py-spy samples the gunicorn worker while wrk
keeps 50 keep-alive clients on one URL; each sample is charged to the innermost frame that belongs to a
known part (authentication, ACL, admission, request id, security headers, negotiation, access log,
metrics, serialisation, ETag, ...), and a part's share of the samples times the run's length over the
requests served is its cost per request.

    .venv/bin/python bench/hook_profile.py <worker pid> <url> [seconds]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PY_SPY = str(REPO / ".venv" / "bin" / "py-spy")
RATE = 500   # samples per second

# (part, fragments of a frame "function (file:line)"); the innermost frame matching any part wins, so a
# JSON encode inside a view counts as serialisation, not as the view.
PARTS: list[tuple[str, tuple[str, ...]]] = [
    ("access log", ("gunicorn/glogging.py", "logging/__init__.py", "app/logconfig.py", "logger_class")),
    ("authentication", ("app/http/auth.py", "app/auth/")),
    ("ACL", ("app/acl/", "app/http/acl.py", "app/http/acl_read.py")),
    ("admission", ("app/http/admission.py",)),
    ("request id", ("app/http/request_id.py",)),
    ("security headers", ("app/http/security.py", "flask_talisman")),
    ("CORS / CSRF", ("app/http/cors.py", "app/http/csrf.py")),
    ("negotiation", ("app/http/negotiation.py", "app/http/formats.py", "werkzeug/datastructures/accept")),
    ("self metrics", ("app/selfmetrics.py", "prometheus_client")),
    ("Allow / Link / Vary", ("app/http/allow.py", "app/http/links.py", "_finalize (app/http/__init__.py",
                             "app/http/options.py")),
    ("ETag / conditional", ("app/http/conditional.py", "app/http/issued_tags.py", "hashlib")),
    ("serialisation", ("json/", "orjson", "app/schemas/", "marshmallow/", "app/http/jsonld.py",
                       "app/http/respond.py", "app/representations")),
    ("response memo / encoded items", ("app/http/response_memo.py", "app/http/encoded_items.py",
                                       "app/http/freshness.py")),
    ("query layer", ("app/query/",)),
    ("cache", ("app/cache/",)),
    ("other Shoal code", ("app/",)),
    ("Flask dispatch", ("flask/", "flask_smorest/")),
    ("werkzeug (request, routing, headers)", ("werkzeug/",)),
    ("gevent WSGI server", ("gevent/pywsgi.py",)),
    ("gunicorn worker", ("gunicorn/",)),
    ("socket I/O and hub", ("gevent/", "socket.py", "ssl.py")),
]


def part_of(stack: list[str]) -> str:
    for frame in reversed(stack):
        for part, fragments in PARTS:
            if any(fragment in frame for fragment in fragments):
                return part
    return "other"


def parse(raw: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in raw.splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            counts[part_of(stack.split(";"))] += int(count)
    return counts


def table(counts: Counter[str], seconds: float, requests: int) -> str:
    total = sum(counts.values()) or 1
    lines = ["| part | share of samples | µs per request |", "|---|---|---|"]
    for part, count in counts.most_common():
        lines.append(f"| {part} | {count / total * 100:.1f} % | {count / RATE / requests * 1e6:.0f} |")
    lines.append(f"| (all sampled) | 100 % | {total / RATE / requests * 1e6:.0f} |")
    return "\n".join(lines)


def profile_worker(pid: int, url: str, *, seconds: float = 6.0, work: Path | None = None) -> dict[str, Any]:
    from bench.bench_small_reads import WRK_SCRIPT, wrk

    folder = Path(work or tempfile.mkdtemp(prefix="shoal-profile-"))
    script, raw_out = folder / "profile.lua", folder / f"profile-{pid}.txt"
    script.write_text(WRK_SCRIPT)
    spy = subprocess.Popen([PY_SPY, "record", "--pid", str(pid), "--rate", str(RATE), "--format", "raw",
                            "--duration", str(int(seconds)), "--output", str(raw_out)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    load = wrk(url, clients=50, seconds=seconds, script=script)
    spy.wait(timeout=seconds + 60)
    counts = parse(raw_out.read_text())
    requests = int(load["rps"] * seconds)
    return {"url": url, "rps": load["rps"], "counts": dict(counts), "markdown": table(counts, seconds, requests)}


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    result = profile_worker(int(sys.argv[1]), sys.argv[2], seconds=float(sys.argv[3]) if len(sys.argv) > 3 else 6.0)
    print(json.dumps({k: v for k, v in result.items() if k != "markdown"}, indent=1))
    print(result["markdown"])
