"""JSON-LD framing: the context document and the envelope members every body starts with."""

from __future__ import annotations

from typing import Any

from app.resources import KIND_SPECS

CONTEXT_PATH = "/api/context.jsonld"
VOCAB = "urn:service:vocab:"


def envelope(base_path: str, object_id: str, object_type: str) -> dict[str, Any]:
    return {"@context": base_path + CONTEXT_PATH, "@id": base_path + object_id, "@type": object_type}


def context_document(base_path: str) -> dict[str, Any]:
    terms: dict[str, Any] = {"@vocab": VOCAB, "@base": base_path + "/",
                             "items": {"@container": "@list"}}
    for spec in KIND_SPECS.values():
        terms[spec.jsonld_type] = VOCAB + spec.jsonld_type
    for extra in ("Collection", "Problem", "ErrorDef", "Health", "Readiness"):
        terms[extra] = VOCAB + extra
    return {"@context": terms, "@id": base_path + CONTEXT_PATH, "@type": "Context"}
