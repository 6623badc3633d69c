"""The ``service://`` URIs of the agent resources: their shapes, parsing, and the object a URI names.

Three static URIs (``service://cluster``, ``service://history``, ``service://recommendations``) and nine
templates: one detail per kind (``service://<plural>/{id}``, stacks and volumes by ``{name}``) and the
service logs (``service://services/{id}/logs``). An ``{id}`` is the object's id or, except for tasks, its
name (node: hostname): the id is tried first, then a name that exactly one object of the kind carries (a
name two objects share, as two local networks may, names none). Task names (``<service>.<slot>``) are
derived, not unique over time, so a task is named by its id only. The canonical form of a URI is the one
with the id (what ``resources/subscribe`` stores and what notifications carry first).
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote, unquote

from app.cache.entries import Entry
from app.cache.store import Cache
from app.resources import ResourceKind

SCHEME = "service://"
MIME = "application/json"
MAX_URI = 1024          # longer URIs are not ours: refused before any work
CLUSTER, HISTORY, RECOMMENDATIONS = "service://cluster", "service://history", "service://recommendations"


@dataclass(frozen=True, slots=True)
class Static:
    uri: str
    name: str
    title: str
    description: str


STATICS: tuple[Static, ...] = (
    Static(CLUSTER, "cluster", "Cluster overview",
           "Counts and health of the whole cluster, as GET /cluster gives them."),
    Static(HISTORY, "history", "Change history",
           "The last 100 change-history entries the caller may read, newest first, as GET /history?limit=100."),
    Static(RECOMMENDATIONS, "recommendations", "Recommendations",
           "The current recommendation findings the caller may read, most severe first, as GET /recommendations."),
)
_STATIC_URIS = {static.uri for static in STATICS}


@dataclass(frozen=True, slots=True)
class Template:
    kind: ResourceKind
    logs: bool
    uri_template: str
    name: str
    title: str
    description: str

    @property
    def variable(self) -> str:
        return self.kind.spec.id_placeholder


def _detail(kind: ResourceKind, title: str, description: str) -> Template:
    placeholder = kind.spec.id_placeholder
    return Template(kind, False, f"{SCHEME}{kind.spec.plural}/{{{placeholder}}}", kind.value, title, description)


TEMPLATES: tuple[Template, ...] = (
    _detail(ResourceKind.NODE, "Node", "A node's detail with its tasks ({id}: node id or hostname)."),
    _detail(ResourceKind.SERVICE, "Service",
            "A service's detail with its tasks, changes and integrations ({id}: service id or name)."),
    Template(ResourceKind.SERVICE, True, f"{SCHEME}services/{{id}}/logs", "service-logs", "Service logs",
             "The service's last 100 log lines and the cursor ({lines, cursor}, as the get_logs tool gives "
             "them); subscribable: notified when new lines arrive."),
    _detail(ResourceKind.TASK, "Task", "A task, enriched with ServiceName and NodeHostname ({id}: task id)."),
    _detail(ResourceKind.STACK, "Stack", "A stack's detail with its member services, configs, secrets, networks "
                                         "and volumes ({name}: stack name)."),
    _detail(ResourceKind.CONFIG, "Config", "A config's metadata and its base64 data ({id}: config id or name)."),
    _detail(ResourceKind.SECRET, "Secret", "A secret's metadata; its data is never shown ({id}: secret id or name)."),
    _detail(ResourceKind.NETWORK, "Network", "A network's detail with the services using it ({id}: id or name)."),
    _detail(ResourceKind.VOLUME, "Volume", "A volume's detail with the services using it ({name}: volume name)."),
)
TEMPLATES_BY_URI = {template.uri_template: template for template in TEMPLATES}


@dataclass(frozen=True, slots=True)
class Parsed:
    """A well-formed resource URI: a static one (``kind`` None) or a template's (``ref`` as sent, decoded)."""

    uri: str
    kind: ResourceKind | None = None
    ref: str = ""
    logs: bool = False

    @property
    def static(self) -> bool:
        return self.kind is None


def parse(uri: object) -> Parsed | None:
    """The shape of ``uri``, or None when it is none of ours (unknown scheme, kind or depth)."""
    if not isinstance(uri, str) or len(uri) > MAX_URI or not uri.startswith(SCHEME):
        return None
    if uri in _STATIC_URIS:
        return Parsed(uri)
    parts = uri[len(SCHEME):].split("/")
    if len(parts) not in (2, 3):
        return None
    kind = ResourceKind.from_plural(parts[0])
    ref = unquote(parts[1])
    if kind is None or not ref or "/" in ref or any(ord(ch) < 0x20 for ch in ref):
        return None
    if len(parts) == 3:
        if kind is not ResourceKind.SERVICE or parts[2] != "logs":
            return None
        return Parsed(uri, kind, ref, logs=True)
    return Parsed(uri, kind, ref)


def detail_uri(kind: ResourceKind, object_id: str) -> str:
    return f"{SCHEME}{kind.spec.plural}/{quote(object_id, safe='')}"


def logs_uri(service_id: str) -> str:
    return detail_uri(ResourceKind.SERVICE, service_id) + "/logs"


def canonical(parsed: Parsed, entry: Entry) -> str:
    """The URI of ``parsed`` with the object's id in place of the name it may have been sent with."""
    if parsed.static:
        return parsed.uri
    return logs_uri(entry.id) if parsed.logs else detail_uri(entry.kind, entry.id)


def resolve(cache: Cache, kind: ResourceKind, ref: str) -> Entry | None:
    """The object ``ref`` names: its id, else (not tasks) the one object of the kind with that name."""
    entry = cache.get(kind, ref)
    if entry is not None or kind is ResourceKind.TASK or kind.spec.id_is_name:
        return entry
    found: Entry | None = None
    for candidate in cache.entries(kind):   # nodes, services, configs, secrets, networks: hundreds at most
        if candidate.name == ref:
            if found is not None:
                return None     # ambiguous: two objects share the name
            found = candidate
    return found
