"""The evaluator (docs/acl.md) on the unit-test cluster: stack ``shop`` (services ``shop_web_api`` and
``shop_db`` with their config, secret, network, volume), the global ``monitor`` outside any stack, their
tasks, three nodes (``manager-1``, ``worker-1``, ``worker-2``) and unlabelled objects."""

from __future__ import annotations

from typing import Any

import pytest

from app.acl.evaluator import UNRESTRICTED, Access, access_for, keys_of
from app.acl.policy import Policy, parse_policy
from app.auth.identity import Identity, ProviderGrant
from app.cache.entries import Entry
from app.cache.store import Cache
from app.resources import ResourceKind
from tests.unit import objects as o

ALICE = Identity("alice", "Alice", "headers", email="alice@example.com", groups=("dev", "eu-ops"))
BOB = Identity("bob", "Bob", "headers", email="bob@corp.example", groups=("ops",))


@pytest.fixture(scope="module")
def cache() -> Cache:
    store = Cache()
    store.replace_all(o.cluster())
    return store


def policy(*grants: dict[str, Any]) -> Policy:
    return parse_policy({"grants": list(grants)})


def grant(*resources: str, audience: list[str] | None = None,
          permissions: tuple[str, ...] = ("read",)) -> dict[str, Any]:
    members: dict[str, Any] = {"resources": list(resources), "permissions": list(permissions)}
    if audience is not None:
        members["audience"] = audience
    return members


def entry(cache: Cache, kind: ResourceKind, key: str) -> Entry:
    found = cache.get(kind, key)
    assert found is not None, (kind, key)
    return found


def readable(access: Access, cache: Cache) -> set[tuple[str, str]]:
    """(kind, name) of everything ``access`` may read, over every kind."""
    return {(kind.value, e.name if kind is not ResourceKind.TASK else e.id)
            for kind in ResourceKind for e in cache.entries(kind) if access.can_read(e, cache)}


def everything(cache: Cache) -> set[tuple[str, str]]:
    return readable(UNRESTRICTED, cache)


SHOP_MEMBERS = {("service", "shop_web_api"), ("service", "shop_db"), ("config", "shop_nginx"),
                ("secret", "shop_db_password"), ("network", "shop_default"), ("volume", "shop_data"),
                ("stack", "shop"), ("task", o.TASK_WEB_1), ("task", o.TASK_WEB_2), ("task", o.TASK_DB_1),
                ("task", o.TASK_DB_OLD)}


# --------------------------------------------------------------------------- modes and defaults
def test_mode_none_and_no_policy_are_unrestricted(cache: Cache) -> None:
    deny_all = policy()
    assert access_for(ALICE, deny_all, auth_enabled=False).unrestricted       # mode none: no evaluation
    assert access_for(ALICE, None, auth_enabled=True).unrestricted           # no policy: everything
    access = access_for(ALICE, None, auth_enabled=True)
    assert readable(access, cache) == everything(cache) and access.has_grants
    assert access.can_write(entry(cache, ResourceKind.SERVICE, o.SVC_DB), cache)


def test_a_policy_denies_by_default(cache: Cache) -> None:
    access = access_for(ALICE, policy(grant("service:nothing-matches")), auth_enabled=True)
    assert not access.unrestricted and access.has_grants
    assert readable(access, cache) == set()
    empty = access_for(ALICE, policy(), auth_enabled=True)
    assert not empty.has_grants and readable(empty, cache) == set()


def test_only_grants_whose_audience_matches_apply(cache: Cache) -> None:
    access = access_for(BOB, policy(grant("*", audience=["group:dev"])), auth_enabled=True)
    assert not access.has_grants and readable(access, cache) == set()


# --------------------------------------------------------------------------- resources
def test_stack_grant_covers_its_members_and_their_tasks(cache: Cache) -> None:
    access = access_for(ALICE, policy(grant("stack:shop")), auth_enabled=True)
    assert readable(access, cache) == SHOP_MEMBERS


def test_stack_glob(cache: Cache) -> None:
    assert readable(access_for(ALICE, policy(grant("stack:sh?p")), auth_enabled=True), cache) == SHOP_MEMBERS
    assert readable(access_for(ALICE, policy(grant("stack:s[!h]*")), auth_enabled=True), cache) == set()


def test_service_grant_covers_its_tasks_only(cache: Cache) -> None:
    access = access_for(ALICE, policy(grant("service:shop_db")), auth_enabled=True)
    assert readable(access, cache) == {("service", "shop_db"), ("task", o.TASK_DB_1), ("task", o.TASK_DB_OLD)}


def test_service_glob_outside_a_stack(cache: Cache) -> None:
    access = access_for(ALICE, policy(grant("service:mon*")), auth_enabled=True)
    assert readable(access, cache) == {("service", "monitor"), ("task", o.TASK_MON_MANAGER),
                                       ("task", o.TASK_MON_WORKER), ("task", o.TASK_MON_DOWN)}


def test_task_by_id(cache: Cache) -> None:
    access = access_for(ALICE, policy(grant(f"task:{o.TASK_WEB_2}")), auth_enabled=True)
    assert readable(access, cache) == {("task", o.TASK_WEB_2)}         # not its service, not its siblings


def test_node_by_hostname(cache: Cache) -> None:
    access = access_for(ALICE, policy(grant("node:worker-*")), auth_enabled=True)
    assert readable(access, cache) == {("node", "worker-1"), ("node", "worker-2")}
    by_id = access_for(ALICE, policy(grant(f"node:{o.NODE_WORKER}")), auth_enabled=True)
    assert readable(by_id, cache) == set()


@pytest.mark.parametrize(("resource", "kind", "name"), [
    ("config:app_*", "config", "app_settings"), ("secret:tls_cert", "secret", "tls_cert"),
    ("network:ingress", "network", "ingress"), ("volume:scratch", "volume", "scratch")])
def test_objects_by_name(cache: Cache, resource: str, kind: str, name: str) -> None:
    assert readable(access_for(ALICE, policy(grant(resource)), auth_enabled=True), cache) == {(kind, name)}


def test_star_is_everything_and_star_type_is_any_type(cache: Cache) -> None:
    assert readable(access_for(ALICE, policy(grant("*")), auth_enabled=True), cache) == everything(cache)
    access = access_for(ALICE, policy(grant("*:shop*")), auth_enabled=True)
    assert readable(access, cache) == SHOP_MEMBERS                       # stack:shop and every shop_* name
    assert access.allows("read", "swarm", "shop-x") and not access.allows("read", "swarm", "cluster")


def test_swarm_and_plugin_keys(cache: Cache) -> None:
    access = access_for(ALICE, policy(grant("swarm:cluster", "plugin:vieux/*")), auth_enabled=True)
    assert access.allows("read", "swarm", "cluster") and access.allows("read", "plugin", "vieux/sshfs")
    assert not access.allows("read", "plugin", "other") and readable(access, cache) == set()


def test_keys_of(cache: Cache) -> None:
    task = entry(cache, ResourceKind.TASK, o.TASK_WEB_1)
    assert keys_of(task, cache) == [("task", o.TASK_WEB_1), ("service", "shop_web_api"), ("stack", "shop")]
    assert keys_of(entry(cache, ResourceKind.NODE, o.NODE_MANAGER), cache) == [("node", "manager-1")]
    assert keys_of(entry(cache, ResourceKind.CONFIG, o.CFG_OTHER), cache) == [("config", "app_settings")]
    assert keys_of(entry(cache, ResourceKind.STACK, "shop"), cache) == [("stack", "shop")]


def test_task_of_an_unknown_service_is_reachable_by_its_id_only() -> None:
    store = Cache()
    store.replace_all({ResourceKind.TASK: [o.task(o.TASK_WEB_1, o.SVC_WEB, o.NODE_MANAGER)]})
    task = entry(store, ResourceKind.TASK, o.TASK_WEB_1)
    assert not access_for(ALICE, policy(grant("stack:*", "service:*")), auth_enabled=True).can_read(task, store)
    assert access_for(ALICE, policy(grant("task:*")), auth_enabled=True).can_read(task, store)


# --------------------------------------------------------------------------- audience
@pytest.mark.parametrize(("audience", "alice", "bob"), [
    (["user:alice"], True, False),
    (["user:al*"], True, False),
    (["user:*@example.com"], True, False),              # by email
    (["user:bob@corp.example"], False, True),
    (["user:ALICE"], False, False),                     # case-sensitive
    (["group:dev"], True, False),
    (["group:*-ops"], True, False),
    (["group:ops"], False, True),
    (["group:dev", "user:bob"], True, True),            # any audience element
    (["*"], True, True),
    (None, True, True),                                 # omitted: everyone
])
def test_audience(cache: Cache, audience: list[str] | None, alice: bool, bob: bool) -> None:
    rules = policy(grant("stack:shop", audience=audience))
    db = entry(cache, ResourceKind.SERVICE, o.SVC_DB)
    assert access_for(ALICE, rules, auth_enabled=True).can_read(db, cache) is alice
    assert access_for(BOB, rules, auth_enabled=True).can_read(db, cache) is bob


def test_an_identity_without_email_matches_on_subject_only(cache: Cache) -> None:
    carol = Identity("carol", "Carol", "cert")
    rules = policy(grant("*", audience=["user:*@*"]), grant("service:monitor", audience=["user:car*"]))
    access = access_for(carol, rules, auth_enabled=True)
    assert readable(access, cache) == {("service", "monitor"), ("task", o.TASK_MON_MANAGER),
                                       ("task", o.TASK_MON_WORKER), ("task", o.TASK_MON_DOWN)}


# --------------------------------------------------------------------------- union and permissions
def test_matching_grants_are_unioned(cache: Cache) -> None:
    rules = policy(grant("service:shop_db", audience=["group:dev"]), grant("node:manager-1", audience=["user:alice"]),
                   grant("volume:scratch", audience=["group:nobody"]))
    assert readable(access_for(ALICE, rules, auth_enabled=True), cache) == {
        ("service", "shop_db"), ("task", o.TASK_DB_1), ("task", o.TASK_DB_OLD), ("node", "manager-1")}


def test_write_implies_read_and_read_is_not_write(cache: Cache) -> None:
    rules = policy(grant("service:shop_db", permissions=("write",)), grant("service:monitor"))
    access = access_for(ALICE, rules, auth_enabled=True)
    db, monitor = entry(cache, ResourceKind.SERVICE, o.SVC_DB), entry(cache, ResourceKind.SERVICE, o.SVC_MONITOR)
    assert access.can_read(db, cache) and access.can_write(db, cache)
    assert access.can_read(monitor, cache) and not access.can_write(monitor, cache)
    task = entry(cache, ResourceKind.TASK, o.TASK_DB_1)
    assert access.can_write(task, cache)                              # task writes follow the service
    assert not access.can_write(entry(cache, ResourceKind.TASK, o.TASK_MON_DOWN), cache)


def test_provider_grants_are_unioned_with_the_policy(cache: Cache) -> None:
    dave = Identity("dave", "Dave", "oidc", grants=(
        ProviderGrant(("volume:scratch",), frozenset({"write"})),
        ProviderGrant(("bogus:x",), frozenset({"read"})),                   # invalid: dropped
        ProviderGrant(("node:worker-1",), frozenset({"admin"}))))          # invalid: dropped
    rules = policy(grant("network:ingress"), grant("*", audience=["user:someone-else"]))
    access = access_for(dave, rules, auth_enabled=True)
    assert readable(access, cache) == {("network", "ingress"), ("volume", "scratch")}
    assert access.can_write(entry(cache, ResourceKind.VOLUME, o.VOL_OTHER), cache)
    assert access_for(dave, None, auth_enabled=True).unrestricted      # provider grants never restrict


def test_provider_grants_alone_give_access_under_an_empty_policy(cache: Cache) -> None:
    erin = Identity("erin", "Erin", "headers", grants=(ProviderGrant(("stack:shop",), frozenset({"read"})),))
    access = access_for(erin, policy(), auth_enabled=True)
    assert access.has_grants and readable(access, cache) == SHOP_MEMBERS


def test_permissions_map(cache: Cache) -> None:
    rules = policy(grant("stack:shop", "service:api", permissions=("write",), audience=["group:dev"]),
                   grant("service:api", "*"), grant("*:foo", audience=["group:dev"]),
                   grant("node:*", audience=["group:nobody"]))
    identity = Identity("alice", "Alice", "headers", groups=("dev",),
                        grants=(ProviderGrant(("volume:v*",), frozenset({"read"})),))
    assert access_for(identity, rules, auth_enabled=True).permissions() == {
        "*": ["read"], "*:foo": ["read"], "service:api": ["read", "write"], "stack:shop": ["read", "write"],
        "volume:v*": ["read"]}
    assert UNRESTRICTED.permissions() == {}


def test_memoised_decisions_stay_right_across_kinds_and_permissions(cache: Cache) -> None:
    access = access_for(ALICE, policy(grant("service:shop_web_api", permissions=("write",)),
                                      grant("service:shop_db")), auth_enabled=True)
    tasks = [entry(cache, ResourceKind.TASK, t) for t in (o.TASK_WEB_1, o.TASK_DB_1, o.TASK_MON_DOWN)]
    for _ in range(2):     # the second round answers from the memo
        assert [access.can_read(t, cache) for t in tasks] == [True, True, False]
        assert [access.can_write(t, cache) for t in tasks] == [True, False, False]
