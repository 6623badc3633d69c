"""``schema_for(kind, version)``: the one place that maps a media-type version to its schemas.

``application/json`` means the latest version; ``application/vnd.service.v1+json`` pins version 1.
"""

from __future__ import annotations

from functools import cache

from marshmallow import Schema

from app.resources import ResourceKind
from app.schemas.v1.envelopes import RESOURCE_SCHEMAS as V1_RESOURCES
from app.schemas.v1.resources import StackMembersV1

LATEST = 1
_VERSIONS: dict[int, dict[ResourceKind, type[Schema]]] = {1: V1_RESOURCES}
# Where the resource inside a detail envelope differs from its list item.
_DETAIL_OVERRIDES: dict[int, dict[ResourceKind, type[Schema]]] = {1: {ResourceKind.STACK: StackMembersV1}}


@cache
def schema_for(kind: ResourceKind, version: int = LATEST) -> Schema:
    return _VERSIONS[version][kind]()


@cache
def many_schema_for(kind: ResourceKind, version: int = LATEST) -> Schema:
    return _VERSIONS[version][kind](many=True)


@cache
def detail_schema_for(kind: ResourceKind, version: int = LATEST) -> Schema:
    return _DETAIL_OVERRIDES[version].get(kind, _VERSIONS[version][kind])()
