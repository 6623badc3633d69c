"""Where the policy comes from (``acl.policy`` / ``acl.policy_file``, formats, hot reload: docs/acl.md):
start-up refusals, inline wins, and the file watcher with a real temporary file (reload, invalid and
deleted files keep the old policy, debounce), in bounded gevent waits."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gevent
import pytest

from app.acl.source import PolicySource, check_policy, load_file
from app.config import ConfigError, Settings, load_settings
from tests.unit.support import wait_until

FAST = 0.02     # poll interval in the watcher tests (production: 0.2 s)


def text(*resources: str) -> str:
    return json.dumps({"grants": [{"resources": list(resources), "permissions": ["read"]}]})


def resources(source: PolicySource) -> list[str]:
    assert source.policy is not None
    return [f"{r.type}:{r.glob}" for g in source.policy.grants for r in g.resources]


def bump(path: Path, content: str) -> None:
    """Write ``content`` and move the mtime on, so a same-size rewrite within the clock's tick still shows."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(content)
    if path.stat().st_mtime_ns <= before:
        os.utime(path, ns=(before + 1_000_000, before + 1_000_000))


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.json"
    path.write_text(text("service:first"))
    return path


@pytest.fixture
def watched(policy_file: Path) -> Iterator[PolicySource]:
    source = PolicySource(Settings(acl_policy_file=str(policy_file)), poll_interval=FAST)
    source.start()
    yield source
    source.stop()


# --------------------------------------------------------------------------- start-up
def test_no_policy_configured() -> None:
    source = PolicySource(Settings())
    assert source.policy is None and source.path is None
    source.start()
    source.stop()


def test_inline_policy_in_any_format() -> None:
    assert resources(PolicySource(Settings(acl_policy=text("stack:a")))) == ["stack:a"]
    yaml_inline = "grants:\n  - resources: [stack:b]\n    permissions: [read]\n"
    assert resources(PolicySource(Settings(acl_policy=yaml_inline))) == ["stack:b"]
    toml_inline = '[[grants]]\nresources = ["stack:c"]\npermissions = ["write"]\n'
    assert resources(PolicySource(Settings(acl_policy=toml_inline))) == ["stack:c"]


def test_inline_wins_over_the_file_which_is_not_watched(policy_file: Path) -> None:
    source = PolicySource(Settings(acl_policy=text("stack:inline"), acl_policy_file=str(policy_file)))
    assert resources(source) == ["stack:inline"] and source.path is None
    assert source.policy is not None and source.policy.source == "acl.policy"


@pytest.mark.parametrize(("settings", "words"), [
    ({"acl_policy": "grants: ["}, ("acl.policy / SERVICE_ACL_POLICY", "neither JSON, TOML nor YAML")),
    ({"acl_policy": '{"grants": [{"resources": ["x:y"], "permissions": ["read"]}]}'},
     ("acl.policy / SERVICE_ACL_POLICY", "unknown resource type 'x'")),
    ({"acl_policy_file": "/nonexistent/policy.yaml"},
     ("acl.policy_file / SERVICE_ACL_POLICY_FILE", "/nonexistent/policy.yaml", "cannot read")),
])
def test_start_up_refusals(settings: dict[str, Any], words: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError) as caught:
        PolicySource(Settings(**settings))
    for word in words:
        assert word in str(caught.value)


def test_an_invalid_file_at_start_fails_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("grants:\n  - resources: []\n    permissions: [read]\n")
    with pytest.raises(ConfigError, match=r"policy\.yaml: grants\[0\]: resources is a non-empty list"):
        PolicySource(Settings(acl_policy_file=str(path)))
    path.write_bytes(b"\xff\xfe grants")
    with pytest.raises(ConfigError, match="not UTF-8"):
        PolicySource(Settings(acl_policy_file=str(path)))
    path.write_text("x" * (1 << 20) + "y")
    with pytest.raises(ConfigError, match="larger than"):
        PolicySource(Settings(acl_policy_file=str(path)))


def test_check_policy_refuses_a_bad_policy_before_anything_starts(tmp_path: Path) -> None:
    bad = '{"grants": [{"resources": ["service:a"], "permissions": ["delete"]}]}'
    with pytest.raises(ConfigError, match=r"acl\.policy / SERVICE_ACL_POLICY: .*unknown permission 'delete'"):
        check_policy(load_settings({"SERVICE_ACL_POLICY": bad}, search_paths=()))
    with pytest.raises(ConfigError, match=r"acl\.policy_file / SERVICE_ACL_POLICY_FILE: .*cannot read"):
        check_policy(load_settings({"SERVICE_ACL_POLICY_FILE": str(tmp_path / "absent.json")}, search_paths=()))
    check_policy(Settings())                                             # nothing set: nothing to check


def test_the_policy_file_variable_is_its_own_key(policy_file: Path) -> None:
    """``SERVICE_ACL_POLICY_FILE`` names the hot-reloaded file; it is not the ``<VAR>_FILE`` form of the inline
    policy (which would make the file's content an inline policy that wins and is never reloaded)."""
    settings = load_settings({"SERVICE_ACL_POLICY_FILE": str(policy_file)}, search_paths=())
    assert settings.acl_policy is None and settings.acl_policy_file == str(policy_file)


@pytest.mark.parametrize(("name", "content"), [
    ("p.json", text("service:j")),
    ("p.yaml", "grants:\n  - resources: ['service:j']\n    permissions: [read]\n"),
    ("p.yml", "grants: [{resources: ['service:j'], permissions: [read]}]\n"),
    ("p.toml", '[[grants]]\nresources = ["service:j"]\npermissions = ["read"]\n'),
    ("policy", "grants:\n  - resources: ['service:j']\n    permissions: [read]\n"),       # detected: YAML
    ("policy.conf", '[[grants]]\nresources = ["service:j"]\npermissions = ["read"]\n'),    # detected: TOML
])
def test_file_formats(tmp_path: Path, name: str, content: str) -> None:
    path = tmp_path / name
    path.write_text(content)
    policy = load_file(str(path))
    assert [r.glob for g in policy.grants for r in g.resources] == ["j"] and policy.source == str(path)


def test_the_extension_decides(tmp_path: Path) -> None:
    path = tmp_path / "p.json"
    path.write_text("grants:\n  - resources: ['service:j']\n    permissions: [read]\n")
    with pytest.raises(ConfigError, match="not valid JSON"):
        PolicySource(Settings(acl_policy_file=str(path)))


# --------------------------------------------------------------------------- the watcher
def test_a_changed_file_is_swapped_in(watched: PolicySource, policy_file: Path,
                                      caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "app.acl.source")
    assert resources(watched) == ["service:first"]
    bump(policy_file, text("service:second", "stack:shop"))
    wait_until(lambda: watched.reloads == 1, message="the watcher's reload")
    assert resources(watched) == ["service:second", "stack:shop"] and watched.last_error is None
    assert "acl policy reloaded (1 grants)" in caplog.text


def test_an_editor_rename_is_seen(watched: PolicySource, policy_file: Path) -> None:
    replacement = policy_file.with_suffix(".tmp")
    replacement.write_text(text("service:renamed"))
    os.replace(replacement, policy_file)                              # a new inode at the same path
    wait_until(lambda: watched.reloads == 1, message="the watcher's reload")
    assert resources(watched) == ["service:renamed"]


def test_an_invalid_file_keeps_the_previous_policy(watched: PolicySource, policy_file: Path,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "app.acl.source")
    previous = watched.policy
    bump(policy_file, '{"grants": [{"resources": ["service:x"], "permissions": ["fly"]}], "note": "TOPSECRET"}')
    wait_until(lambda: watched.last_error is not None, message="the failed reload")
    assert watched.policy is previous and watched.reloads == 0
    assert "unknown permission 'fly'" in (watched.last_error or "")
    record = next(r for r in caplog.records if r.getMessage().startswith("acl policy reload failed"))
    assert record.levelno == logging.WARNING and "keeping the previous policy" in record.getMessage()
    assert "TOPSECRET" not in caplog.text                             # the file's content is never logged
    bump(policy_file, text("service:fixed"))                          # a good file after a bad one
    wait_until(lambda: watched.reloads == 1, message="the watcher's reload")
    assert resources(watched) == ["service:fixed"] and watched.last_error is None


def test_a_deleted_file_keeps_the_previous_policy(watched: PolicySource, policy_file: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "app.acl.source")
    previous = watched.policy
    policy_file.unlink()
    wait_until(lambda: watched.last_error == "the file is gone", message="the removal noticed")
    assert watched.policy is previous
    assert "acl policy file removed, keeping the previous policy" in caplog.text
    policy_file.write_text(text("service:back"))                      # created again: loaded
    wait_until(lambda: watched.reloads == 1, message="the watcher's reload")
    assert resources(watched) == ["service:back"]


def test_debounce_swaps_only_after_two_equal_polls(policy_file: Path) -> None:
    source = PolicySource(Settings(acl_policy_file=str(policy_file)))   # not started: polled by hand
    bump(policy_file, text("service:half"))
    source.poll()
    assert resources(source) == ["service:first"]                     # changed: wait for it to settle
    bump(policy_file, text("service:whole-content"))                  # still being written
    source.poll()
    assert resources(source) == ["service:first"]
    source.poll()                                                     # unchanged across two polls: swap
    assert resources(source) == ["service:whole-content"] and source.reloads == 1
    source.poll()
    source.poll()
    assert source.reloads == 1                                        # an unchanged file is read once


def test_the_default_interval_reloads_within_a_second(policy_file: Path) -> None:
    source = PolicySource(Settings(acl_policy_file=str(policy_file)))
    source.start()
    try:
        gevent.sleep(0.25)   # not a wait: puts the change between two 200 ms polls (the timing under test)
        bump(policy_file, text("service:quick"))
        started = gevent.get_hub().loop.now()
        wait_until(lambda: source.reloads == 1, message="the reload")
        assert 0.15 <= gevent.get_hub().loop.now() - started <= 0.7  # two 200 ms polls, give or take one
    finally:
        source.stop()


def test_stop_ends_the_watcher(policy_file: Path) -> None:
    source = PolicySource(Settings(acl_policy_file=str(policy_file)), poll_interval=FAST)
    source.start()
    source.start()                                                    # idempotent
    source.stop()
    bump(policy_file, text("service:after-stop"))
    gevent.sleep(FAST * 5)   # not a wait: five poll intervals in which a stopped watcher may reload nothing
    assert resources(source) == ["service:first"] and source.reloads == 0
