"""Service insights: ``changes`` (PreviousSpec → Spec) and ``integrations`` (tools configured by labels),
as pure functions and through the Service detail envelope."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from flask.testing import FlaskClient
from jsonschema import Draft202012Validator

from app.query.service_insights import (
    MAX_CHANGES,
    MAX_VALUE_CHARS,
    detail_members,
    integrations,
    render_path,
    spec_changes,
)
from app.resources import ResourceKind
from tests.unit import objects as o
from tests.unit.objects import Raw

SECOND = 1_000_000_000


def updated(service: Raw, change: Any) -> Raw:
    """The service after an update: its current Spec becomes PreviousSpec, ``change`` edits the new Spec."""
    result = copy.deepcopy(service)
    result["PreviousSpec"] = copy.deepcopy(service["Spec"])
    change(result["Spec"])
    return result


def fresh(labels: dict[str, str] | None = None) -> Raw:
    return o.service(o.SVC_WEB, "web", labels=labels)


def container(spec: Raw) -> Raw:
    result: Raw = spec["TaskTemplate"]["ContainerSpec"]
    return result


def fields_of(changes: list[dict[str, Any]]) -> list[str]:
    return [change["field"] for change in changes]


# --------------------------------------------------------------------------- changes
def test_a_service_never_updated_has_no_changes_member() -> None:
    service = fresh({"traefik.enable": "true"})
    assert "PreviousSpec" not in service
    assert spec_changes(service) == []
    assert "changes" not in detail_members(service)


def test_an_update_that_changed_nothing_has_no_changes_member() -> None:
    service = updated(fresh(), lambda spec: None)
    assert spec_changes(service) == []
    assert "changes" not in detail_members(service)


def test_an_image_change_is_one_entry_with_old_and_new() -> None:
    service = updated(fresh(), lambda spec: container(spec).update(Image="nginx:1.27"))
    assert spec_changes(service) == [{"field": "TaskTemplate.ContainerSpec.Image",
                                      "old": f"nginx:1.25@sha256:{'ab' * 32}", "new": "nginx:1.27"}]


def test_labels_added_and_removed_are_bracketed_and_omit_the_missing_side() -> None:
    def change(spec: Raw) -> None:
        spec["Labels"].pop("zone")
        spec["Labels"]["traefik.enable"] = "true"
        spec["Labels"]["empty"] = ""

    service = updated(fresh({"zone": "a"}), change)
    assert spec_changes(service) == [
        {"field": 'Labels["empty"]', "new": ""},  # an empty label is still a label
        {"field": 'Labels["traefik.enable"]', "new": "true"},
        {"field": 'Labels["zone"]', "old": "a"},
    ]


def test_env_is_compared_by_variable_name_and_order_does_not_matter() -> None:
    service = fresh()
    container(service["Spec"])["Env"] = ["A=1", "B=2", "GONE=x", "URL=http://x/?a=b"]

    def change(spec: Raw) -> None:
        container(spec)["Env"] = ["URL=http://x/?a=c", "C=3", "B=2", "A=9", "BARE"]

    assert spec_changes(updated(service, change)) == [
        {"field": 'TaskTemplate.ContainerSpec.Env["A"]', "old": "1", "new": "9"},
        {"field": 'TaskTemplate.ContainerSpec.Env["BARE"]', "new": None},
        {"field": 'TaskTemplate.ContainerSpec.Env["C"]', "new": "3"},
        {"field": 'TaskTemplate.ContainerSpec.Env["GONE"]', "old": "x"},
        {"field": 'TaskTemplate.ContainerSpec.Env["URL"]', "old": "http://x/?a=b", "new": "http://x/?a=c"},
    ]
    reordered = updated(service, lambda spec: container(spec)["Env"].reverse())
    assert spec_changes(reordered) == []


def test_other_lists_are_one_value_shown_whole() -> None:
    service = fresh()
    container(service["Spec"])["Args"] = ["sleep", "10"]
    changes = spec_changes(updated(service, lambda spec: container(spec).update(Args=["sleep", "20"])))
    assert changes == [{"field": "TaskTemplate.ContainerSpec.Args", "old": ["sleep", "10"], "new": ["sleep", "20"]}]


def test_nested_dicts_report_leaves_and_an_added_dict_is_expanded() -> None:
    def change(spec: Raw) -> None:
        spec["TaskTemplate"]["Resources"]["Limits"] = {"NanoCPUs": SECOND // 2, "MemoryBytes": 268435456}
        spec["UpdateConfig"]["Parallelism"] = 2
        spec["TaskTemplate"]["Placement"]["Constraints"] = ["node.role==manager"]

    assert spec_changes(updated(fresh(), change)) == [
        {"field": "TaskTemplate.Placement.Constraints", "new": ["node.role==manager"]},
        {"field": "TaskTemplate.Resources.Limits.MemoryBytes", "new": 268435456},
        {"field": "TaskTemplate.Resources.Limits.NanoCPUs", "new": SECOND // 2},
        {"field": "UpdateConfig.Parallelism", "old": 1, "new": 2},
    ]


def test_a_removed_dict_is_reported_leaf_by_leaf_with_old_only() -> None:
    service = fresh()
    service["Spec"]["TaskTemplate"]["LogDriver"] = {"Name": "json-file", "Options": {"max-size": "10m"}}
    changes = spec_changes(updated(service, lambda spec: spec["TaskTemplate"].pop("LogDriver")))
    assert changes == [{"field": "TaskTemplate.LogDriver.Name", "old": "json-file"},
                       {"field": 'TaskTemplate.LogDriver.Options["max-size"]', "old": "10m"}]


def test_a_type_change_shows_both_values_whole() -> None:
    service = fresh()
    service["Spec"]["TaskTemplate"]["Extra"] = {"A": 1}
    changes = spec_changes(updated(service, lambda spec: spec["TaskTemplate"].update(Extra="flat")))
    assert changes == [{"field": "TaskTemplate.Extra", "old": {"A": 1}, "new": "flat"}]


def test_force_update_counter_is_a_change() -> None:
    changes = spec_changes(updated(fresh(), lambda spec: spec["TaskTemplate"].update(ForceUpdate=1)))
    assert changes == [{"field": "TaskTemplate.ForceUpdate", "old": 0, "new": 1}]


def test_zero_values_and_engine_defaults_appearing_are_not_changes() -> None:
    """What ``insertDefaults`` adds (and what Go omits as zero) says nothing new about the service."""
    previous = fresh()
    for key in ("UpdateConfig",):
        previous["Spec"].pop(key)
    previous["Spec"]["TaskTemplate"].pop("RestartPolicy")

    def change(spec: Raw) -> None:
        rollout = {"Parallelism": 1, "FailureAction": "pause", "Monitor": 5 * SECOND, "MaxFailureRatio": 0,
                   "Order": "stop-first"}
        spec["UpdateConfig"], spec["RollbackConfig"] = dict(rollout), dict(rollout)
        spec["TaskTemplate"]["RestartPolicy"] = {"Condition": "any", "Delay": 5 * SECOND, "MaxAttempts": 0}
        container(spec).update(StopGracePeriod=10 * SECOND, ReadOnly=False, Hostname="", Mounts=[], Sysctls={})
        spec["Mode"]["Replicated"]["Extra"] = None

    assert spec_changes(updated(previous, change)) == []
    non_default = updated(previous, lambda spec: spec.update(UpdateConfig={"Parallelism": 2, "Order": "stop-first"}))
    assert spec_changes(non_default) == [{"field": "UpdateConfig.Parallelism", "new": 2}]


def test_changes_are_sorted_by_path_whatever_the_key_order() -> None:
    def change(spec: Raw) -> None:
        container(spec)["Image"] = "nginx:2"
        spec["Mode"]["Replicated"]["Replicas"] = 3
        spec["Labels"] = {"z": "1", "a.b": "2", **spec["Labels"]}
        spec["EndpointSpec"]["Mode"] = "dnsrr"

    assert fields_of(spec_changes(updated(fresh(), change))) == [
        "EndpointSpec.Mode", 'Labels["a.b"]', 'Labels["z"]', "Mode.Replicated.Replicas",
        "TaskTemplate.ContainerSpec.Image"]


def test_changes_are_bounded_and_the_rest_counted() -> None:
    service = updated(fresh(), lambda spec: spec["Labels"].update({f"l{i:03}": "x" for i in range(150)}))
    assert len(spec_changes(service)) == 150
    members = detail_members(service)
    assert len(members["changes"]) == MAX_CHANGES == 100
    assert members["changesOmitted"] == 50
    assert (members["changes"][0]["field"], members["changes"][-1]["field"]) == ('Labels["l000"]', 'Labels["l099"]')
    assert "changesOmitted" not in detail_members(updated(fresh(), lambda spec: spec["Labels"].update(a="1")))


def test_large_values_are_cut_and_marked_abridged() -> None:
    long_text = "x" * (MAX_VALUE_CHARS + 10)
    big_list = [f"arg-{i}" for i in range(400)]

    def change(spec: Raw) -> None:
        spec["Labels"]["note"] = long_text
        container(spec)["Args"] = big_list
        container(spec)["Image"] = "y" * MAX_VALUE_CHARS  # exactly at the bound: shown as is

    note, args, image = spec_changes(updated(fresh(), change))
    assert note == {"field": 'Labels["note"]', "new": "x" * MAX_VALUE_CHARS + "…", "abridged": True}
    assert args["abridged"] is True and args["new"].startswith('["arg-0","arg-1",')
    assert len(args["new"]) == MAX_VALUE_CHARS + 1
    assert image == {"field": "TaskTemplate.ContainerSpec.Image", "old": f"nginx:1.25@sha256:{'ab' * 32}",
                     "new": "y" * MAX_VALUE_CHARS}


@pytest.mark.parametrize(("path", "rendered"), [
    (("TaskTemplate", "ContainerSpec", "Image"), "TaskTemplate.ContainerSpec.Image"),
    (("Labels", "traefik.enable"), 'Labels["traefik.enable"]'),
    (("Labels", "zone"), 'Labels["zone"]'),
    (("Labels", 'say "hi"'), 'Labels["say \\"hi\\""]'),
    (("TaskTemplate", "ContainerSpec", "Sysctls", "net.core.somaxconn"),
     'TaskTemplate.ContainerSpec.Sysctls["net.core.somaxconn"]'),
    (("Odd", "with space"), 'Odd["with space"]'),
])
def test_paths_render_map_keys_unambiguously(path: tuple[str, ...], rendered: str) -> None:
    assert render_path(path) == rendered


# --------------------------------------------------------------------------- integrations
TRAEFIK = {
    "traefik.enable": "true",
    "traefik.swarm.network": "proxy",
    "traefik.http.routers.web.rule": "Host(`shop.example.com`) && PathPrefix(`/api`)",
    "traefik.http.routers.web.entryPoints": "websecure",
    "traefik.http.routers.web.tls.certresolver": "letsencrypt",
    "traefik.http.routers.web.tls.options": "modern@file",
    "traefik.http.routers.web.tls.domains[1].main": "shop.example.org",
    "traefik.http.routers.web.tls.domains[0].main": "shop.example.com",
    "traefik.http.routers.web.tls.domains[0].sans": "www.shop.example.com, api.shop.example.com",
    "traefik.http.routers.web.middlewares": "auth@file, compress",
    "traefik.http.routers.web.service": "web",
    "traefik.http.routers.web.priority": "10",
    "traefik.http.routers.web-http.rule": "Host(`shop.example.com`)",
    "traefik.http.routers.web-http.entrypoints": "web",
    "traefik.http.routers.web-http.middlewares": "to-https",
    "traefik.http.services.web.loadbalancer.server.port": "8080",
    "traefik.http.services.web.loadBalancer.server.scheme": "h2c",
    "traefik.http.middlewares.compress.compress": "true",
    "traefik.http.middlewares.to-https.redirectscheme.scheme": "https",
    "traefik.tcp.routers.db.rule": "HostSNI(`*`)",
    "traefik.tcp.routers.db.tls": "false",
    "traefik.tcp.routers.pg.tls": "true",
    "traefik.tcp.routers.pg.tls.passthrough": "true",
    "traefik.http.routers.plain.tls": "TRUE",
    "traefik.tcp.services.db.loadbalancer.server.port": "5432",
}
SHEPHERD = {"shepherd.enable": "true", "shepherd.auth.config": "blog"}
CRONJOB = {"swarm.cronjob.enable": "true", "swarm.cronjob.schedule": "0 */5 * * * *",
           "swarm.cronjob.skip-running": "false", "swarm.cronjob.replicas": "2",
           "swarm.cronjob.registry-auth": "true", "swarm.cronjob.query-registry": "0"}
DIUN = {"diun.enable": "true", "diun.watch_repo": "true", "diun.notify_on": "new;update",
        "diun.max_tags": "10", "diun.include_tags": r"^\d+\.\d+\.\d+$;^latest$", "diun.exclude_tags": "rc",
        "diun.sort_tags": "semver", "diun.regopt": "dockerhub", "diun.hub_link": "https://hub.example/x",
        "diun.platform": "linux/amd64", "diun.metadata.team": "shop", "diun.metadata.owner": "ops"}
UNRELATED = {o.STACK_LABEL: "shop", "traefikx.enable": "true", "my.diun.enable": "true", "swarm.other": "1",
             "shepherdish": "x"}


def one(labels: dict[str, str]) -> dict[str, Any]:
    found = integrations(fresh(labels))
    assert len(found) == 1, found
    return found[0]


def test_traefik_routers_services_middlewares_and_network() -> None:
    traefik = one(TRAEFIK)
    assert traefik == {
        "name": "traefik", "enabled": True,
        "routers": [
            {"name": "db", "protocol": "tcp", "rule": "HostSNI(`*`)", "entrypoints": [], "middlewares": []},
            {"name": "pg", "protocol": "tcp", "entrypoints": [], "middlewares": [], "tls": {"passthrough": True}},
            {"name": "plain", "protocol": "http", "entrypoints": [], "middlewares": [], "tls": {}},
            {"name": "web", "protocol": "http", "rule": "Host(`shop.example.com`) && PathPrefix(`/api`)",
             "entrypoints": ["websecure"], "middlewares": ["auth@file", "compress"], "service": "web",
             "priority": 10,
             "tls": {"certResolver": "letsencrypt", "options": "modern@file",
                     "domains": [{"main": "shop.example.com", "sans": ["www.shop.example.com", "api.shop.example.com"]},
                                 {"main": "shop.example.org", "sans": []}]}},
            {"name": "web-http", "protocol": "http", "rule": "Host(`shop.example.com`)", "entrypoints": ["web"],
             "middlewares": ["to-https"]},
        ],
        "services": [{"name": "db", "protocol": "tcp", "port": 5432},
                     {"name": "web", "protocol": "http", "port": 8080, "scheme": "h2c"}],
        "middlewares": ["compress", "to-https"],
        "network": "proxy",
        "labels": dict(sorted(TRAEFIK.items())),
    }
    assert list(traefik["labels"]) == sorted(TRAEFIK)


@pytest.mark.parametrize(("enable", "expected"), [("false", False), ("0", False), ("yes", False), ("TRUE", True)])
def test_traefik_enable_label_sets_enabled(enable: str, expected: bool) -> None:
    assert one({"traefik.enable": enable})["enabled"] is expected


def test_traefik_without_enable_label_follows_exposed_by_default() -> None:
    traefik = one({"traefik.http.services.x.loadbalancer.server.port": "eighty"})
    assert traefik["enabled"] is True
    assert traefik["services"] == [{"name": "x", "protocol": "http", "port": None}]
    assert (traefik["routers"], traefik["middlewares"]) == ([], [])


def test_shepherd() -> None:
    assert one(SHEPHERD) == {"name": "shepherd", "enabled": True, "authConfig": "blog", "labels": SHEPHERD}
    assert one({"shepherd.enable": "false"})["enabled"] is False


def test_swarm_cronjob() -> None:
    assert one(CRONJOB) == {"name": "swarm-cronjob", "enabled": True, "schedule": "0 */5 * * * *",
                            "skipRunning": False, "replicas": 2, "registryAuth": True, "queryRegistry": False,
                            "labels": dict(sorted(CRONJOB.items()))}
    disabled = one({"swarm.cronjob.schedule": "@hourly", "swarm.cronjob.replicas": "many"})
    assert disabled == {"name": "swarm-cronjob", "enabled": False, "schedule": "@hourly", "replicas": None,
                        "labels": {"swarm.cronjob.replicas": "many", "swarm.cronjob.schedule": "@hourly"}}


def test_diun() -> None:
    assert one(DIUN) == {"name": "diun", "enabled": True, "watchRepo": True, "notifyOn": ["new", "update"],
                         "maxTags": 10, "includeTags": [r"^\d+\.\d+\.\d+$", "^latest$"], "excludeTags": ["rc"],
                         "sortTags": "semver", "regopt": "dockerhub", "hubLink": "https://hub.example/x",
                         "platform": "linux/amd64", "metadata": {"owner": "ops", "team": "shop"},
                         "labels": dict(sorted(DIUN.items()))}
    assert one({"diun.watch_repo": "true"})["enabled"] is False  # watchByDefault is false
    assert one({"diun.enable": "false", "diun.max_tags": "ten"}) == {
        "name": "diun", "enabled": False, "maxTags": None,
        "labels": {"diun.enable": "false", "diun.max_tags": "ten"}}


def test_all_four_sorted_by_name_and_unrelated_labels_ignored() -> None:
    found = integrations(fresh({**UNRELATED, **TRAEFIK, **DIUN, **CRONJOB, **SHEPHERD}))
    assert [item["name"] for item in found] == ["diun", "shepherd", "swarm-cronjob", "traefik"]
    for item in found:
        assert not set(item["labels"]) & set(UNRELATED)


def test_no_tool_labels_means_no_integrations_member() -> None:
    service = fresh(UNRELATED)
    container(service["Spec"])["Labels"]["traefik.enable"] = "true"  # container labels are not read
    assert integrations(service) == []
    assert "integrations" not in detail_members(service)
    assert detail_members(service) == {}


# --------------------------------------------------------------------------- through the detail envelope
def _insightful_web() -> Raw:
    web = o.service(o.SVC_WEB, "shop_web_api", stack="shop", replicas=2, configs=((o.CFG_SHOP, "shop_nginx"),),
                    secrets=((o.SEC_SHOP, "shop_db_password"),), networks=(o.NET_SHOP,), volumes=(o.VOL_SHOP,),
                    labels={"traefik.enable": "true", **SHEPHERD})
    web["PreviousSpec"] = copy.deepcopy(web["Spec"])
    web["PreviousSpec"]["TaskTemplate"]["ContainerSpec"]["Image"] = "nginx:1.24"
    web["PreviousSpec"]["Labels"].pop("shepherd.enable")
    return web


@pytest.fixture
def objects() -> dict[ResourceKind, list[Raw]]:
    """The synthetic cluster with ``shop_web_api`` updated once and labelled for traefik and shepherd."""
    cluster = o.cluster()
    cluster[ResourceKind.SERVICE] = [_insightful_web() if raw["ID"] == o.SVC_WEB else raw
                                     for raw in cluster[ResourceKind.SERVICE]]
    return cluster


def test_service_detail_carries_changes_and_integrations_after_tasks(client: FlaskClient) -> None:
    body = client.get(f"/services/{o.SVC_WEB}").get_json()
    assert list(body) == ["@context", "@id", "@type", "service", "tasks", "changes", "integrations"]
    assert [task["id"] for task in body["tasks"]] == [o.TASK_WEB_1, o.TASK_WEB_2]
    assert body["changes"] == [
        {"field": 'Labels["shepherd.enable"]', "new": "true"},
        {"field": "TaskTemplate.ContainerSpec.Image", "old": "nginx:1.24", "new": f"nginx:1.25@sha256:{'ab' * 32}"},
    ]
    assert [(item["name"], item["enabled"]) for item in body["integrations"]] == [("shepherd", True),
                                                                                  ("traefik", True)]
    assert body["integrations"][0]["authConfig"] == "blog"
    assert body["service"]["PreviousSpec"]["TaskTemplate"]["ContainerSpec"]["Image"] == "nginx:1.24"


def test_service_detail_without_previous_spec_or_tool_labels_has_neither_member(client: FlaskClient) -> None:
    body = client.get(f"/services/{o.SVC_DB}").get_json()
    assert body["service"]["Spec"]["Name"] == "shop_db"
    assert "changes" not in body and "integrations" not in body


def test_the_versioned_media_type_carries_the_same_members(client: FlaskClient) -> None:
    latest = client.get(f"/services/{o.SVC_WEB}").get_json()
    response = client.get(f"/services/{o.SVC_WEB}", headers={"Accept": "application/vnd.service.v1+json"})
    assert response.mimetype == "application/vnd.service.v1+json"
    body = response.get_json()
    assert (body["changes"], body["integrations"]) == (latest["changes"], latest["integrations"])


def test_service_details_conform_to_the_openapi_document(client: FlaskClient) -> None:
    document = client.get("/api").get_json()
    validator = Draft202012Validator({"$ref": "#/components/schemas/ServiceDetailV1",
                                      "components": document["components"]})
    integration = document["components"]["schemas"]["IntegrationV1"]
    assert integration["properties"]["name"]["enum"] == ["diun", "shepherd", "swarm-cronjob", "traefik"]
    assert integration["additionalProperties"] is True
    for service_id in (o.SVC_WEB, o.SVC_DB, o.SVC_MONITOR):
        body = client.get(f"/services/{service_id}").get_json()
        errors = [error.message for error in validator.iter_errors(body)]
        assert errors == [], service_id
    rich = {"@context": "/api/context.jsonld", "@id": "/services/x", "@type": "Service",
            **detail_members(updated(fresh({**TRAEFIK, **DIUN, **CRONJOB, **SHEPHERD}),
                                     lambda spec: spec["Labels"].update({f"l{i:03}": "x" * 2000
                                                                         for i in range(120)})))}
    assert rich["changesOmitted"] == 20 and rich["changes"][0]["abridged"] is True
    assert [error.message for error in validator.iter_errors(rich)] == []
    wrong = {**rich, "integrations": [{"name": "watchtower", "enabled": "yes", "labels": {}}]}
    assert len(list(validator.iter_errors(wrong))) == 2
