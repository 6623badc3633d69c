"""Policy validation (every refusal), the three formats, and provider grants (docs/acl.md)."""

from __future__ import annotations

from typing import Any

import pytest

from app.acl.policy import Audience, PolicyError, ResourcePattern, parse_policy, parse_provider_grants
from app.acl.source import decode, load_text
from app.auth.identity import ProviderGrant


def grant(**members: Any) -> dict[str, Any]:
    return {"resources": ["service:web"], "permissions": ["read"], **members}


def refused(document: Any, *words: str) -> str:
    with pytest.raises(PolicyError) as caught:
        parse_policy(document, "test")
    message = str(caught.value)
    for word in words:
        assert word in message, message
    return message


# --------------------------------------------------------------------------- validation
def test_a_valid_policy_is_parsed_and_normalised() -> None:
    policy = parse_policy({"grants": [
        {"resources": ["stack:webapp-*", "service:api", "*", "*:foo"],
         "audience": ["group:engineering", "user:*@example.com"], "permissions": ["write"]},
        {"resources": ["swarm:cluster"], "permissions": ["read"]}]}, "test")
    first, second = policy.grants
    assert first.resources == (ResourcePattern("stack", "webapp-*"), ResourcePattern("service", "api"),
                               ResourcePattern("*", "*"), ResourcePattern("*", "foo"))
    assert first.audience == (Audience("group", "engineering"), Audience("user", "*@example.com"))
    assert first.permissions == frozenset({"read", "write"})      # write implies read
    assert second.audience == () and second.permissions == frozenset({"read"})
    assert policy.source == "test"


@pytest.mark.parametrize("audience", [None, "*", [], ["*"], ["group:x", "*"]])
def test_audience_omitted_or_star_means_everyone(audience: Any) -> None:
    members = {} if audience is None else {"audience": audience}
    assert parse_policy({"grants": [grant(**members)]}).grants[0].audience == ()


def test_an_empty_grant_list_is_a_policy_that_denies_everything() -> None:
    assert parse_policy({"grants": []}).grants == ()


@pytest.mark.parametrize(("document", "words"), [
    ([], ("grants list",)),
    ({"grant": []}, ("grants list",)),
    ({"grants": {}}, ("grants list",)),
    ({"grants": ["service:web"]}, ("grants[0]", "object")),
    ({"grants": [grant(resources=[])]}, ("grants[0]", "resources", "non-empty")),
    ({"grants": [grant(resources="service:web")]}, ("resources", "non-empty list")),
    ({"grants": [{"permissions": ["read"]}]}, ("resources",)),
    ({"grants": [grant(permissions=[])]}, ("permissions", "non-empty")),
    ({"grants": [{"resources": ["*"]}]}, ("permissions",)),
    ({"grants": [grant(permissions=["read", "delete"])]}, ("unknown permission", "'delete'")),
    ({"grants": [grant(permissions="read")]}, ("permissions",)),
    ({"grants": [grant(resources=["bogus:x"])]}, ("unknown resource type", "'bogus'")),
    ({"grants": [grant(resources=["services:web"])]}, ("unknown resource type",)),
    ({"grants": [grant(resources=["web"])]}, ("'web'", "<type>:<glob>")),
    ({"grants": [grant(resources=["service:"])]}, ("<type>:<glob>",)),
    ({"grants": [grant(resources=[""])]}, ("non-empty string",)),
    ({"grants": [grant(resources=[7])]}, ("non-empty string",)),
    ({"grants": [grant(resources=["service:web-[ab"])]}, ("bad glob", "web-[ab")),
    ({"grants": [grant(resources=["service:web-]"])]}, ("bad glob",)),
    ({"grants": [grant(audience=["team:x"])]}, ("audience", "user:<glob>, group:<glob> or *")),
    ({"grants": [grant(audience=["user:"])]}, ("audience",)),
    ({"grants": [grant(audience=["alice"])]}, ("audience",)),
    ({"grants": [grant(audience=["group:dev-[x"])]}, ("bad glob",)),
    ({"grants": [grant(audience="group:x")]}, ("audience is a list",)),
    ({"grants": [grant(audience=[3])]}, ("audience",)),
])
def test_every_refusal_names_the_element(document: Any, words: tuple[str, ...]) -> None:
    refused(document, *words)


def test_the_first_bad_grant_refuses_the_whole_policy() -> None:
    message = refused({"grants": [grant(), grant(), grant(permissions=["execute"])]}, "grants[2]")
    assert message.startswith("test: ")


# --------------------------------------------------------------------------- formats
POLICY = {"grants": [{"resources": ["stack:webapp-*", "service:api"],
                      "audience": ["group:engineering", "user:*@example.com"], "permissions": ["read", "write"]}]}
JSON_TEXT = ('{"grants": [{"resources": ["stack:webapp-*", "service:api"], '
             '"audience": ["group:engineering", "user:*@example.com"], "permissions": ["read", "write"]}]}')
YAML_TEXT = """\
grants:
  - resources: ["stack:webapp-*", "service:api"]             # type:glob or "*"
    audience:  ["group:engineering", "user:*@example.com"]   # "*" or omitted = everyone
    permissions: ["read", "write"]
"""
TOML_TEXT = """\
[[grants]]
resources = ["stack:webapp-*", "service:api"]
audience = ["group:engineering", "user:*@example.com"]
permissions = ["read", "write"]
"""


@pytest.mark.parametrize("text", [JSON_TEXT, YAML_TEXT, TOML_TEXT], ids=["json", "yaml", "toml"])
def test_each_format_is_detected_without_an_extension(text: str) -> None:
    assert decode(text) == POLICY
    assert decode(text, ".policy") == POLICY        # an unknown extension: detected too


@pytest.mark.parametrize(("suffix", "text"), [(".json", JSON_TEXT), (".yaml", YAML_TEXT), (".yml", YAML_TEXT),
                                              (".YML", YAML_TEXT), (".toml", TOML_TEXT)])
def test_the_extension_names_the_format(suffix: str, text: str) -> None:
    assert decode(text, suffix) == POLICY


@pytest.mark.parametrize(("suffix", "text", "name"), [(".json", YAML_TEXT, "JSON"), (".toml", JSON_TEXT, "TOML"),
                                                      (".yaml", "grants: [", "YAML")])
def test_the_extension_is_not_second_guessed(suffix: str, text: str, name: str) -> None:
    with pytest.raises(PolicyError, match=f"not valid {name}"):
        decode(text, suffix)


def test_json_wins_over_yaml_when_both_read_it() -> None:
    assert decode('{"grants": []}') == {"grants": []}


def test_undetectable_text_names_all_three_attempts_without_quoting_it() -> None:
    with pytest.raises(PolicyError) as caught:
        decode("grants: [\n  secret-looking-line")
    message = str(caught.value)
    assert "JSON:" in message and "TOML:" in message and "YAML:" in message
    assert "secret-looking-line" not in message and "\n" not in message


@pytest.mark.parametrize("text", ["", "   \n", "just words", "42"])
def test_text_that_is_no_mapping_is_refused(text: str) -> None:
    with pytest.raises(PolicyError):
        load_text(text, "test")


def test_load_text_validates_after_decoding() -> None:
    with pytest.raises(PolicyError, match="unknown permission"):
        load_text("grants:\n  - resources: ['*']\n    permissions: [admin]\n", "test")
    assert len(load_text(YAML_TEXT, "test").grants) == 1


# --------------------------------------------------------------------------- provider grants
def test_provider_grants_from_json_text_drop_invalid_entries() -> None:
    text = ('[{"resources": ["stack:shop", "*"], "permissions": ["write"]},'
            ' {"resources": ["bogus:x"], "permissions": ["read"]},'
            ' {"resources": ["service:a"], "permissions": ["read", "admin"]},'
            ' {"resources": [], "permissions": ["read"]},'
            ' {"resources": ["service:[x"], "permissions": ["read"]},'
            ' {"permissions": ["read"]}, "service:x", 3,'
            ' {"resources": ["node:n-*"], "permissions": ["read"]}]')
    assert parse_provider_grants(text) == (
        ProviderGrant(("stack:shop", "*"), frozenset({"read", "write"})),
        ProviderGrant(("node:n-*",), frozenset({"read"})))


@pytest.mark.parametrize("value", [None, "", "not json", "{}", '{"resources": ["*"], "permissions": ["read"]}',
                                   "null", 5, {"resources": ["*"]}])
def test_provider_grants_that_are_no_array_give_nothing(value: Any) -> None:
    assert parse_provider_grants(value) == ()


def test_provider_grants_already_decoded_and_as_bytes() -> None:
    decoded = [{"resources": ["service:api"], "permissions": ["read"]}]
    expected = (ProviderGrant(("service:api",), frozenset({"read"})),)
    assert parse_provider_grants(decoded) == expected
    assert parse_provider_grants(b'[{"resources": ["service:api"], "permissions": ["read"]}]') == expected
