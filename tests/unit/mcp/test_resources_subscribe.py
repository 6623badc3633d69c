"""resources/subscribe and resources/unsubscribe: a session is needed, the URI must name an object the caller
may read now (hidden and absent alike not found), the canonical URI (the id) is stored, a logs URI starts its
service's follower, and the follower cap is an error naming the limit."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.mcp import resource_logs
from app.mcp.registry import INVALID_PARAMS, INVALID_REQUEST, RESOURCE_NOT_FOUND_LEGACY
from tests.unit import objects as o
from tests.unit.mcp.test_resources_support import FakeSession, acl_app, call, call_error, identity
from tests.unit.support import Harness

__all__ = ["acl_app"]


@pytest.fixture
def followed(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Record the log followers subscribe starts instead of opening engine streams."""
    started: list[str] = []
    monkeypatch.setattr("app.mcp.resources.follow_logs", lambda app, service_id: started.append(service_id))
    yield started


def test_subscribe_needs_a_session(acl_app: Harness) -> None:
    error = call_error(acl_app, "root", "resources/subscribe", {"uri": "service://cluster"})
    assert error.code == INVALID_REQUEST
    assert call_error(acl_app, "root", "resources/unsubscribe", {"uri": "service://cluster"}).code == INVALID_REQUEST


def test_a_name_is_stored_as_the_canonical_id_uri(acl_app: Harness) -> None:
    session = FakeSession(identity("alice"))
    assert call(acl_app, "alice", "resources/subscribe", {"uri": "service://services/shop_db"}, session=session) == {}
    assert call(acl_app, "alice", "resources/subscribe", {"uri": "service://stacks/shop"}, session=session) == {}
    assert session.subscriptions == {f"service://services/{o.SVC_DB}", "service://stacks/shop"}
    call(acl_app, "alice", "resources/unsubscribe", {"uri": "service://services/shop_db"}, session=session)
    assert session.subscriptions == {"service://stacks/shop"}
    call(acl_app, "alice", "resources/unsubscribe", {"uri": "service://stacks/shop"}, session=session)
    assert session.subscriptions == set()


def test_hidden_absent_and_malformed_uris_are_not_found(acl_app: Harness) -> None:
    session = FakeSession(identity("alice"))
    for uri in (f"service://services/{o.SVC_MONITOR}", "service://services/nosuch", "service://widgets/1",
                "https://example.test/", f"service://services/{o.SVC_MONITOR}/logs"):
        error = call_error(acl_app, "alice", "resources/subscribe", {"uri": uri}, session=session)
        assert error.code == RESOURCE_NOT_FOUND_LEGACY and error.data == {"uri": uri}
    assert call_error(acl_app, "alice", "resources/subscribe", {}, session=session).code == INVALID_PARAMS
    assert session.subscriptions == set()


def test_the_static_uris_need_a_grant(acl_app: Harness) -> None:
    session = FakeSession(identity("nobody"))
    for uri in ("service://cluster", "service://history", "service://recommendations"):
        assert call_error(acl_app, "nobody", "resources/subscribe", {"uri": uri}, session=session).code \
            == RESOURCE_NOT_FOUND_LEGACY
        call(acl_app, "bob", "resources/subscribe", {"uri": uri}, session=FakeSession(identity("bob")))


def test_unsubscribe_of_a_gone_object_is_accepted(acl_app: Harness) -> None:
    session = FakeSession(identity("root"), subscriptions={"service://services/gone"})
    assert call(acl_app, "root", "resources/unsubscribe", {"uri": "service://services/gone"}, session=session) == {}
    assert session.subscriptions == set()


def test_a_logs_uri_starts_its_follower(acl_app: Harness, followed: list[str]) -> None:
    session = FakeSession(identity("alice"))
    call(acl_app, "alice", "resources/subscribe", {"uri": "service://services/shop_web_api/logs"}, session=session)
    assert followed == [o.SVC_WEB]
    assert session.subscriptions == {f"service://services/{o.SVC_WEB}/logs"}


def test_the_follower_cap_refuses_naming_the_limit(acl_app: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    def at_cap(app: object, service_id: str) -> None:
        raise resource_logs.FollowerLimit("at most 32 service log URIs are followed at once")

    monkeypatch.setattr("app.mcp.resources.follow_logs", at_cap)
    session = FakeSession(identity("root"))
    error = call_error(acl_app, "root", "resources/subscribe", {"uri": f"service://services/{o.SVC_DB}/logs"},
                       session=session)
    assert error.code == INVALID_REQUEST and "at most 32" in error.message
    assert session.subscriptions == set()


def test_a_listen_filter_is_honoured_for_our_uris_and_starts_log_followers(acl_app: Harness,
                                                                           followed: list[str]) -> None:
    from flask import g

    from app.mcp.registry import CallContext
    from app.mcp.resources import honor_subscriptions

    requested = ["service://services/shop_db", "https://elsewhere.test/x", "service://services/shop_db",
                 "service://services/shop_web_api/logs", f"service://services/{o.SVC_MONITOR}/logs",
                 "service://cluster"]
    who = identity("alice")
    with acl_app.app.test_request_context("/mcp", method="POST"):
        g.identity = who
        honored = honor_subscriptions(CallContext(who, "2026-07-28"), requested)
    assert honored == ["service://services/shop_db", "service://services/shop_web_api/logs",
                       f"service://services/{o.SVC_MONITOR}/logs", "service://cluster"]
    assert followed == [o.SVC_WEB]          # monitor's logs are not alice's: no follower for them
