"""app.topology: the logical and physical graphs from a synthetic cache, and their renderings (JGF,
GraphML parsed by xml.etree, DOT checked by tests/unit/topology/dot_syntax.py), names with markup,
quotes, backslashes and newlines included."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from app.cache.store import Cache
from app.resources import ResourceKind
from app.topology import dot, graphml, jgf, legacy
from app.topology.logical import logical_graph
from app.topology.model import urn
from app.topology.physical import physical_graph
from tests.unit import objects as o
from tests.unit.topology.dot_syntax import DotSyntaxError, parse

K = ResourceKind
CTX = "/api/context.jsonld"
GML = "{http://graphml.graphdrawing.org/xmlns}"
NET_OTHER = o.engine_id("netother")
NET_LOCAL = o.engine_id("netlocalbridge")
SVC_ODD = o.engine_id("svcodd")
ODD_NAME = 'we<ird>&"na\\me\nx'


def cache_of(objects: dict[ResourceKind, list[o.Raw]]) -> Cache:
    cache = Cache()
    cache.replace_all(objects, cache.write_token(), 0.01)
    return cache


@pytest.fixture
def wide(objects: dict[ResourceKind, list[o.Raw]]) -> Cache:
    """The unit cluster plus: an overlay shared by shop_db and a service with an awkward name, and a
    bridge network those two also share (no edge for it)."""
    objects[K.NETWORK] += [o.network(NET_OTHER, 'net "two"'),
                           o.network(NET_LOCAL, "localnet", driver="bridge", scope="local")]
    db = objects[K.SERVICE][1]
    db["Spec"]["TaskTemplate"]["Networks"] += [{"Target": NET_OTHER}, {"Target": NET_LOCAL}]
    odd = o.service(SVC_ODD, ODD_NAME, stack='st"ack', networks=(NET_OTHER, NET_LOCAL), replicas=1)
    odd["Endpoint"]["Ports"] = [{"Protocol": "tcp", "TargetPort": 80, "PublishedPort": 8080, "PublishMode": "host"}]
    objects[K.SERVICE].append(odd)
    objects[K.TASK].append(o.task(o.engine_id("taskodd"), SVC_ODD, o.NODE_WORKER, slot=1))
    return cache_of(objects)


def test_logical_nodes_are_services_with_metadata(synced_cache: Cache) -> None:
    graph = logical_graph(synced_cache, CTX)
    assert (graph.id, graph.type, graph.directed) == ("network", "network-topology", False)
    nodes = {node.key: node for node in graph.nodes}
    web = nodes[urn("service", o.SVC_WEB)]
    assert web.label == "shop_web_api"
    assert web.metadata == {"@context": CTX, "kind": "service", "replicas": 2, "image": "nginx:1.25",
                            "mode": "replicated", "ports": [], "updateStatus": None}
    assert nodes[urn("service", o.SVC_MONITOR)].metadata["replicas"] == 2   # global: tasks desired running


def test_logical_edges_join_services_sharing_an_overlay(synced_cache: Cache) -> None:
    graph = logical_graph(synced_cache, CTX)
    (edge,) = graph.edges   # monitor is only on the ingress network: no edge
    assert {edge.source, edge.target} == {urn("service", o.SVC_WEB), urn("service", o.SVC_DB)}
    (network,) = edge.metadata["networks"]
    assert network == {"id": urn("network", o.NET_SHOP), "name": "shop_default", "driver": "overlay",
                       "scope": "swarm", "aliases": {urn("service", o.SVC_WEB): ["api"],
                                                     urn("service", o.SVC_DB): ["db"]}}
    assert edge.metadata["@context"] == CTX
    (stack,) = graph.hyperedges
    assert stack.metadata == {"@context": CTX, "kind": "stack", "name": "shop"}
    assert sorted(stack.nodes) == sorted([urn("service", o.SVC_WEB), urn("service", o.SVC_DB)])


def test_only_overlay_networks_make_edges(wide: Cache) -> None:
    edges = {(edge.source, edge.target): edge for edge in logical_graph(wide, CTX).edges}
    first, second = sorted([urn("service", o.SVC_DB), urn("service", SVC_ODD)])
    pair = (first, second)
    assert [n["name"] for n in edges[pair].metadata["networks"]] == ['net "two"']   # not the bridge
    assert "aliases" in edges[pair].metadata["networks"][0]   # the odd service's alias from its name


def test_ports_read_published_target_protocol(wide: Cache) -> None:
    nodes = {node.key: node for node in logical_graph(wide, CTX).nodes}
    assert nodes[urn("service", SVC_ODD)].metadata["ports"] == ["8080:80/tcp"]


def test_physical_graph_places_current_tasks(synced_cache: Cache) -> None:
    graph = physical_graph(synced_cache, CTX)
    assert (graph.id, graph.type) == ("placement", "placement-topology")
    kinds = {node.key: node.metadata["kind"] for node in graph.nodes}
    assert sum(kind == "node" for kind in kinds.values()) == 3 and sum(k == "service" for k in kinds.values()) == 3
    manager = next(node for node in graph.nodes if node.key == urn("node", o.NODE_MANAGER))
    assert manager.label == "manager-1"
    assert manager.metadata == {"@context": CTX, "kind": "node", "role": "manager", "state": "ready",
                                "availability": "active"}
    edges = {hyper.nodes[0]: hyper for hyper in graph.hyperedges}
    web = edges[urn("service", o.SVC_WEB)]
    assert web.nodes == [urn("service", o.SVC_WEB), urn("node", o.NODE_MANAGER), urn("node", o.NODE_WORKER)]
    assert web.metadata["kind"] == "placement" and web.metadata["@context"] == CTX
    assert web.metadata["tasks"][0] == {"id": urn("task", o.TASK_WEB_1), "node": urn("node", o.NODE_MANAGER),
                                        "state": "running", "slot": 1, "image": "nginx:1.25"}
    # shut-down tasks (db's old task, monitor on the down node) are history, not placement
    db_tasks = [task["id"] for task in edges[urn("service", o.SVC_DB)].metadata["tasks"]]
    assert db_tasks == [urn("task", o.TASK_DB_1)]
    monitor = edges[urn("service", o.SVC_MONITOR)]
    assert urn("node", o.NODE_DOWN) not in monitor.nodes and monitor.metadata["tasks"][0]["slot"] is None


def test_jgf_document_shape(synced_cache: Cache) -> None:
    body = jgf.document([logical_graph(synced_cache, CTX), physical_graph(synced_cache, CTX)])
    logical, physical = body["graphs"]
    assert set(logical) == {"id", "type", "label", "directed", "metadata", "nodes", "edges", "hyperedges"}
    assert "edges" not in physical and physical["hyperedges"]
    for graph in body["graphs"]:
        assert graph["metadata"]["@context"] == CTX
        for key, node in graph["nodes"].items():
            assert key.startswith("urn:service:") and node["metadata"]["@context"] == CTX
        for hyper in graph["hyperedges"]:
            assert set(hyper["nodes"]) <= set(graph["nodes"]) and hyper["metadata"]["@context"] == CTX
    json.dumps(body)


def test_graphml_is_well_formed_and_complete(wide: Cache) -> None:
    graphs = [logical_graph(wide, CTX), physical_graph(wide, CTX)]
    root = ET.fromstring(graphml.render(graphs))
    assert root.tag == GML + "graphml"
    keys = {key.get("id") for key in root.iter(GML + "key")}
    logical, physical = root.findall(GML + "graph")
    assert logical.get("id") == "network" and logical.get("edgedefault") == "undirected"
    ids = [node.get("id") for node in root.iter(GML + "node")]
    assert len(ids) == len(set(ids))   # unique in the document, though services are in both graphs
    labels = {data.text for data in root.iter(GML + "data") if data.get("key") == "d_label"}
    assert ODD_NAME in labels   # markup, quotes and backslashes come back intact
    node_ids = set(ids)
    for element in [*root.iter(GML + "edge")]:
        assert {element.get("source"), element.get("target")} <= node_ids
    for endpoint in root.iter(GML + "endpoint"):
        assert endpoint.get("node") in node_ids
    assert {data.get("key") for data in root.iter(GML + "data")} <= keys
    assert len(logical.findall(GML + "edge")) == len(graphs[0].edges)
    assert len(physical.findall(GML + "hyperedge")) == len(graphs[1].hyperedges)


def test_graphml_drops_characters_xml_cannot_carry(objects: dict[ResourceKind, list[o.Raw]]) -> None:
    objects[K.SERVICE].append(o.service(o.engine_id("svcctl"), "bell\x07name"))
    ET.fromstring(graphml.render([logical_graph(cache_of(objects), CTX)]))


def test_dot_parses_and_keeps_names(wide: Cache) -> None:
    graph = logical_graph(wide, CTX)
    parsed = parse(dot.render(graph).decode())
    assert not parsed.directed and parsed.name == "network"
    assert set(parsed.nodes) == {node.key for node in graph.nodes}
    labels = {parsed.attributes[node.key]["label"] for node in graph.nodes}
    assert ODD_NAME.replace("\n", "\\n") in labels   # newline as \n; quotes and backslashes round-trip
    assert {(a, b) for a, b, _ in parsed.edges} == {(e.source, e.target) for e in graph.edges}
    assert len(parsed.subgraphs) == 2   # stacks "shop" and 'st"ack'


@pytest.mark.parametrize("name", ["trailing\\", '"', "\\\"", "graph", "a -- b", "x]; y", "{}", "é ü"])
def test_dot_quote_survives_awkward_names(name: str) -> None:
    parsed = parse(f"graph {{ {dot.quote(name)} [label={dot.quote(name)}]; }}")
    assert parsed.nodes == [name]


def test_dot_checker_rejects_broken_text() -> None:
    for text in ['graph { "a" -- }', 'graph { "a" -> "b" }', 'graph { "a\\" }', "graph { a [label=] }"]:
        with pytest.raises(DotSyntaxError):
            parse(text)


def test_legacy_views_are_flat(synced_cache: Cache) -> None:
    networks = legacy.networks_view(logical_graph(synced_cache, CTX))
    assert [n["name"] for n in networks["nodes"]] == ["monitor", "shop_db", "shop_web_api"]
    assert networks["edges"] == [{"source": o.SVC_DB, "target": o.SVC_WEB, "networks": [o.NET_SHOP]}] or \
        networks["edges"] == [{"source": o.SVC_WEB, "target": o.SVC_DB, "networks": [o.NET_SHOP]}]
    assert networks["networks"][0]["services"] == sorted([o.SVC_WEB, o.SVC_DB])
    placement = legacy.placement_view(physical_graph(synced_cache, CTX))
    by_host = {node["hostname"]: node for node in placement["nodes"]}
    assert sorted(task["id"] for task in by_host["worker-1"]["tasks"]) == sorted(
        [o.TASK_WEB_2, o.TASK_DB_1, o.TASK_MON_WORKER])
    assert by_host["worker-2"]["tasks"] == []
