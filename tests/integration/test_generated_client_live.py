"""A client generated from the live ``/api`` by openapi-python-client parses what the server answers.

The generator drops a schema whose properties map to one Python name (``@id``/``id``) and every schema that
refers to it; ``app.schemas.jsonld_keys`` describes those keywords so that nothing is dropped. Here the
client is generated from the document gunicorn serves, then a list, a detail (with task references),
history, search and a problem are read through it against the lab swarm, asserting model objects.
"""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import requests

pytestmark = pytest.mark.integration
GENERATOR = Path(sys.executable).parent / "openapi-python-client"
PACKAGE = "shoal_generated_client"
# What the generator prints when it leaves something out of the client.
DROPPED = ("Unable to process schema", "Failure to process schema", "same python_name",
           "Could not find reference")


@pytest.fixture(scope="module")
def generated(server: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ModuleType, str]]:
    """Generate the client package from ``{server}/api``; yield it with the generator's output."""
    assert GENERATOR.exists(), f"{GENERATOR} missing: scripts/setup installs openapi-python-client ([test] extra)"
    work = tmp_path_factory.mktemp("generated")
    document = work / "openapi.json"
    document.write_text(json.dumps(requests.get(f"{server}/api", timeout=10).json()))
    config = work / "config.json"
    config.write_text(json.dumps({"post_hooks": [], "project_name_override": PACKAGE,
                                  "package_name_override": PACKAGE}))
    run = subprocess.run([str(GENERATOR), "generate", "--path", str(document), "--config", str(config),
                          "--meta", "none", "--output-path", str(work / PACKAGE)],
                         capture_output=True, text=True, timeout=300, check=False)
    output = run.stdout + run.stderr
    assert run.returncode == 0, output[-4000:]
    sys.path.insert(0, str(work))
    try:
        yield importlib.import_module(PACKAGE), output
    finally:
        sys.path.remove(str(work))
        for name in [name for name in sys.modules if name.split(".")[0] == PACKAGE]:
            del sys.modules[name]


def module(package: ModuleType, name: str) -> Any:
    return importlib.import_module(f"{package.__name__}.{name}")


@contextmanager
def client(package: ModuleType, server: str) -> Iterator[Any]:
    with module(package, "client").Client(base_url=server, timeout=10.0, raise_on_unexpected_status=True) as api:
        yield api


def test_the_generator_keeps_every_schema(generated: tuple[ModuleType, str]) -> None:
    package, output = generated
    for message in DROPPED:
        assert message not in output, output[-4000:]
    models = module(package, "models")
    for name in ("ProblemV1", "HistoryEntryV1", "HistoryCollectionV1", "SearchHitV1", "SearchResultV1",
                 "ReferenceV1", "TaskReferenceV1", "NodeReferenceV1", "ServiceDetailV1", "NodeDetailV1"):
        assert hasattr(models, name), name


def test_a_list_and_a_detail_parse_into_models(generated: tuple[ModuleType, str], server: str) -> None:
    package, _ = generated
    models = module(package, "models")
    with client(package, server) as api:
        listing = module(package, "api.services.get_services").sync(client=api, limit=5)
        assert isinstance(listing, models.ServiceCollectionV1), listing
        assert listing.items and len(listing.items) <= 5
        first = listing.items[0]      # engine fields keep their case (ID); the JSON-LD @id is ``id``
        assert first.id == f"/services/{first.ID}"
        detail = module(package, "api.services.get_services_id").sync(first.ID, client=api)
        assert isinstance(detail, models.ServiceDetailV1), detail
        assert detail.service.ID == first.ID and detail.id == first.id
        nodes = module(package, "api.nodes.get_nodes").sync(client=api)
        node = module(package, "api.nodes.get_nodes_id").sync(nodes.items[0].ID, client=api)
        assert isinstance(node, models.NodeDetailV1), node
        assert node.tasks and all(isinstance(task, models.TaskReferenceV1) for task in node.tasks)
        reference = node.tasks[0]
        assert reference["@id"] == f"/tasks/{reference.id}"   # the keyword kept next to the plain id
        assert reference.to_dict()["@id"] == reference["@id"]   # and written back as it came


def test_history_and_search_parse_into_models(generated: tuple[ModuleType, str], server: str) -> None:
    package, _ = generated
    models = module(package, "models")
    with client(package, server) as api:
        history = module(package, "api.history.get_history").sync(client=api, limit=3)
        assert isinstance(history, models.HistoryCollectionV1), history
        assert history.items and all(isinstance(entry, models.HistoryEntryV1) for entry in history.items)
        entry = history.items[0]
        assert isinstance(entry.id, int) and entry["@id"] == f"/history/{entry.id}"
        found = module(package, "api.insight.get_search").sync(client=api, q="demo")
        assert isinstance(found, models.SearchResultV1), found
        hits = [hit for kind_hits in found.results.additional_properties.values() for hit in kind_hits]
        assert hits and all(isinstance(hit, models.SearchHitV1) for hit in hits), found.results
        assert all(hit["@id"].endswith(hit.id) for hit in hits)


def test_a_problem_parses_into_the_problem_model(generated: tuple[ModuleType, str], server: str) -> None:
    package, _ = generated
    models = module(package, "models")
    with client(package, server) as api:
        response = module(package, "api.services.get_services_id").sync_detailed("no-such-service", client=api)
        assert response.status_code == 404
        problem = response.parsed
        assert isinstance(problem, models.ProblemV1), problem
        assert problem.status == 404 and problem.type_ == "about:blank" and "no-such-service" in problem.detail
        assert problem["@type"] == "Problem"
        invalid = module(package, "api.services.get_services").sync(client=api, filter_="name ==")
        assert isinstance(invalid, models.ProblemV1), invalid
        assert invalid.status == 400 and invalid.code.startswith("FLT")
        assert invalid.type_ == f"/api/errors/{invalid.code}"
