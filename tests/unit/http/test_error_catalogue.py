"""The error registry is the complete error catalogue (docs/read-api.md), and /api/errors serves all of it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from flask.testing import FlaskClient

from app.errors import REGISTRY

PROBLEM = "application/problem+json"

# The error-code catalogue, row by row (code → status), in its order.
CATALOGUE: dict[str, int] = {
    # API
    "API001": 406, "API002": 406, "API003": 406, "API004": 415, "API005": 500, "API006": 400,
    "API007": 400, "API008": 400, "API009": 500, "API010": 409, "API011": 400,
    # AUT
    "AUT001": 401, "AUT002": 403, "AUT003": 400, "AUT004": 500,
    # ACL
    "ACL001": 403, "ACL002": 403,
    # OPS
    "OPS001": 403,
    # FLT
    "FLT001": 400, "FLT002": 400, "FLT003": 400,
    # SEA
    "SEA001": 400, "SEA002": 400,
    # MTR
    "MTR001": 503, "MTR002": 502, "MTR003": 400, "MTR004": 400, "MTR005": 429, "MTR006": 400, "MTR007": 500,
    # LOG
    "LOG001": 429, "LOG002": 400, "LOG003": 400, "LOG004": 400, "LOG005": 400, "LOG006": 500, "LOG007": 500,
    "LOG008": 500,
    # SSE
    "SSE001": 429,
    # ENG
    "ENG001": 503, "ENG002": 503, "ENG003": 400, "ENG004": 500,
    # SWM
    "SWM001": 501, "SWM002": 503, "SWM003": 500, "SWM004": 501, "SWM005": 500, "SWM006": 500,
    "SWM007": 500, "SWM008": 500, "SWM009": 500, "SWM010": 400, "SWM011": 400,
    # PLG
    "PLG001": 500, "PLG002": 400, "PLG003": 500, "PLG004": 404,
    # NOD
    "NOD001": 409, "NOD002": 409, "NOD003": 404, "NOD004": 400, "NOD005": 400,
    # SVC
    "SVC001": 409, "SVC002": 409, "SVC003": 404, "SVC004": 400, "SVC005": 400, "SVC006": 400,
    "SVC007": 400, "SVC008": 400, "SVC009": 400, "SVC010": 400, "SVC011": 400, "SVC012": 400,
    "SVC013": 400, "SVC014": 400, "SVC015": 400, "SVC016": 400, "SVC017": 400, "SVC018": 400,
    "SVC019": 400,
    # TSK
    "TSK001": 409, "TSK002": 404,
    # STK
    "STK001": 404,
    # VOL
    "VOL001": 409, "VOL002": 404,
    # NET
    "NET001": 409, "NET002": 404,
    # CFG
    "CFG001": 409, "CFG002": 404, "CFG003": 409, "CFG004": 400, "CFG005": 409,
    # SEC
    "SEC001": 409, "SEC002": 404, "SEC003": 409, "SEC004": 400, "SEC005": 409,
}

# Codes added later (never renumbered, never removed).
OWN_ADDITIONS: dict[str, int] = {"API012": 400, "API013": 503, "API014": 413, "FLT004": 400, "FLT005": 400,
                                 "FLT006": 400, "SSE002": 400, "SWM012": 409, "TSK003": 409, "VOL003": 400,
                                 "NET003": 409, "NET004": 400,
                                 "API015": 400, "API016": 400, "API017": 400,
                                 "API018": 400, "API019": 400, "API020": 422, "API021": 409, "API022": 400,
                                 "ENG005": 504,
                                 "SSE003": 403,
                                 "AUT005": 403}

# The domain prefixes, in the catalogue's order.
PREFIXES = ("API", "AUT", "ACL", "OPS", "FLT", "SEA", "MTR", "LOG", "SSE", "ENG", "SWM", "PLG", "NOD", "SVC",
            "TSK", "STK", "VOL", "NET", "CFG", "SEC")
INTERFACE_PREFIXES = {"API", "AUT", "OPS", "FLT", "SEA", "MTR", "LOG", "ACL", "SSE", "ENG", "SWM", "PLG", "NOD",
                      "SVC", "TSK", "STK", "VOL", "NET", "CFG", "SEC"}


@pytest.fixture
def client(shared_client: FlaskClient) -> FlaskClient:
    return shared_client


# --------------------------------------------------------------------------- the registry itself
def test_the_transcribed_table_is_the_size_of_the_reference() -> None:
    assert len(CATALOGUE) == 99
    assert set(PREFIXES) == INTERFACE_PREFIXES
    assert not set(CATALOGUE) & set(OWN_ADDITIONS)


@pytest.mark.parametrize(("code", "status"), sorted(CATALOGUE.items()))
def test_every_reference_code_is_registered_with_its_status(code: str, status: int) -> None:
    assert code in REGISTRY, f"{code} is missing from REGISTRY"
    assert REGISTRY[code].status == status


@pytest.mark.parametrize(("code", "status"), sorted(OWN_ADDITIONS.items()))
def test_the_projects_own_codes_are_kept(code: str, status: int) -> None:
    assert REGISTRY[code].status == status


def test_the_registry_holds_nothing_beyond_the_reference_and_the_own_additions() -> None:
    assert set(REGISTRY) == set(CATALOGUE) | set(OWN_ADDITIONS)


def test_existing_titles_are_unchanged() -> None:
    assert REGISTRY["FLT002"].title == "Filter syntax error"
    assert REGISTRY["FLT002"].description == "The filter expression does not parse."
    assert REGISTRY["SVC003"].title == "Service not found"
    assert REGISTRY["ENG001"].title == "Engine unavailable"


@pytest.mark.parametrize("code", sorted(REGISTRY))
def test_every_code_is_well_formed_with_a_known_prefix(code: str) -> None:
    assert re.fullmatch(r"^[A-Z]{3}\d{3}$", code), code
    assert code[:3] in INTERFACE_PREFIXES
    definition = REGISTRY[code]
    assert definition.code == code
    assert 400 <= definition.status <= 599
    assert definition.title.strip() and len(definition.title) <= 60
    assert "\n" not in definition.title
    assert definition.description.strip().endswith(".")
    assert definition.suggestion.strip().endswith(".")


def test_rows_are_grouped_by_prefix_in_the_reference_order() -> None:
    prefixes = [code[:3] for code in REGISTRY]
    groups = [p for i, p in enumerate(prefixes) if i == 0 or prefixes[i - 1] != p]
    assert groups == list(PREFIXES), "each prefix must form one block, in the catalogue's order"
    for prefix in PREFIXES:
        numbers = [int(code[3:]) for code in REGISTRY if code.startswith(prefix)]
        assert numbers == sorted(numbers), prefix


def test_numbers_are_contiguous_from_one_within_each_prefix() -> None:
    for prefix in PREFIXES:
        numbers = sorted(int(code[3:]) for code in REGISTRY if code.startswith(prefix))
        assert numbers == list(range(1, len(numbers) + 1)), prefix


# --------------------------------------------------------------------------- served over HTTP
def _all_listed(client: FlaskClient) -> tuple[list[dict[str, Any]], int]:
    """Every item of /api/errors, following limit/offset paging should the collection be paged."""
    items: list[dict[str, Any]] = []
    total = None
    while total is None or len(items) < total:
        response = client.get(f"/api/errors?limit=200&offset={len(items)}")
        assert response.status_code == 200, response.get_data(as_text=True)
        body = response.get_json()
        assert body["@type"] == "Collection"
        total = body["total"]
        if not body["items"]:
            break
        items.extend(body["items"])
    assert total is not None
    return items, total


def test_api_errors_lists_the_whole_catalogue(client: FlaskClient) -> None:
    first = client.get("/api/errors")
    assert first.status_code == 200
    assert first.get_json()["total"] == len(REGISTRY)
    items, total = _all_listed(client)
    assert total == len(REGISTRY)
    codes = [item["code"] for item in items]
    assert len(codes) == len(set(codes)) == total
    assert set(codes) == set(CATALOGUE) | set(OWN_ADDITIONS)
    for item in items:
        assert item["status"] == REGISTRY[item["code"]].status
        assert item["@id"] == f"/api/errors/{item['code']}"


@pytest.mark.parametrize("code", ["SVC001", "NOD002"])
def test_a_version_conflict_code_is_served_with_its_definition(client: FlaskClient, code: str) -> None:
    response = client.get(f"/api/errors/{code}")
    assert response.status_code == 200
    body = response.get_json()
    definition = REGISTRY[code]
    assert body["@id"] == f"/api/errors/{code}"
    assert body["@type"] == "ErrorDef"
    assert body["code"] == code
    assert body["status"] == 409
    assert (body["title"], body["description"], body["suggestion"]) == (
        definition.title, definition.description, definition.suggestion)


@pytest.mark.parametrize("code", ["AUT001", "MTR002", "SWM001", "PLG004", "SEC005"])
def test_newly_catalogued_codes_are_served(client: FlaskClient, code: str) -> None:
    response = client.get(f"/api/errors/{code}")
    assert response.status_code == 200
    assert response.get_json()["status"] == CATALOGUE[code]


@pytest.mark.parametrize("code", ["ZZZ001", "SVC020", "NOD000", "svc001"])
def test_an_unknown_code_is_a_generic_404(client: FlaskClient, code: str) -> None:
    response = client.get(f"/api/errors/{code}")
    assert response.status_code == 404
    assert response.mimetype == PROBLEM
    body = response.get_json(force=True)
    assert body["type"] == "about:blank"
    assert body["status"] == 404
    assert body["title"] == "Not Found"
