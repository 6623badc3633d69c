"""Where the policy comes from: inline config (``acl.policy``, wins) or a file (``acl.policy_file``).

Both are JSON, YAML or TOML (docs/acl.md, Formats): a file by its extension (``.json``, ``.yaml``/``.yml``,
``.toml``), anything else (the inline text, a file without one of those extensions) by trying JSON, then
TOML, then YAML. An invalid inline policy, or an invalid or unreadable file, fails the start
(:class:`~app.config.ConfigError`, which ``gunicorn.conf.py`` and ``shoal`` turn into one line and status 2;
the master calls :func:`check_policy` right after ``load_settings``, so it fails before any worker starts;
``app.config`` itself knows nothing of policies, as it imports nothing above it).

The file is hot-reloaded (docs/acl.md): a greenlet polls its (mtime, size, inode) every 200 ms and reloads once the
signature has stayed the same across two polls (the debounce: a file being written is not read half-way;
an editor's write-then-rename shows as a new inode). The new policy replaces the old one in one assignment,
so a request sees either the old or the new policy, never a mix. An invalid new file, or a deleted one,
keeps the previous policy and logs why (never the file's content).
"""

from __future__ import annotations

import json
import logging
import os
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gevent
import yaml  # type: ignore[import-untyped,unused-ignore]  # PyYAML ships no type hints

from app.acl.policy import Policy, PolicyError, parse_policy
from app.config.settings import ConfigError

if TYPE_CHECKING:
    from app.config import Settings

log = logging.getLogger(__name__)

POLL_INTERVAL = 0.2                  # seconds between two looks at the file (the 200 ms debounce)
MAX_BYTES = 1 << 20                  # a policy is a few KiB; refuse anything over 1 MiB
_OFF_HUB_BYTES = 64 << 10            # parse bigger files in gevent's thread pool
_INLINE = "acl.policy / SERVICE_ACL_POLICY"
_FILE = "acl.policy_file / SERVICE_ACL_POLICY_FILE"
_YamlLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

Signature = tuple[int, int, int]     # (mtime_ns, size, inode)


# --------------------------------------------------------------------------- decoding
def _json(text: str) -> Any:
    return json.loads(text)


def _toml(text: str) -> Any:
    return tomllib.loads(text)


def _yaml(text: str) -> Any:
    return yaml.load(text, Loader=_YamlLoader)  # a safe loader (C or pure Python)


_DECODERS: dict[str, Callable[[str], Any]] = {"JSON": _json, "TOML": _toml, "YAML": _yaml}
_BY_SUFFIX = {".json": "JSON", ".yaml": "YAML", ".yml": "YAML", ".toml": "TOML"}


def _reason(exc: Exception) -> str:
    """One line, without quoting the document (PyYAML's messages show the offending line)."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        return f"{exc.problem or exc.context or 'invalid YAML'}{where}"
    if isinstance(exc, yaml.YAMLError):
        return "invalid YAML"
    return " ".join(str(exc).split())


def decode(text: str, suffix: str | None = None) -> Any:
    """The document in ``text``: by ``suffix`` when it names a format, else JSON → TOML → YAML.

    :raises PolicyError: not valid in the named format, or in none of the three.
    """
    named = _BY_SUFFIX.get((suffix or "").lower())
    if named is not None:
        try:
            return _DECODERS[named](text)
        except (ValueError, yaml.YAMLError) as exc:   # JSONDecodeError and TOMLDecodeError are ValueErrors
            raise PolicyError(f"not valid {named}: {_reason(exc)}") from None
    if not text.strip():
        raise PolicyError("empty")
    failures = []
    for name, decoder in _DECODERS.items():
        try:
            document = decoder(text)
        except (ValueError, yaml.YAMLError) as exc:
            failures.append(f"{name}: {_reason(exc)}")
            continue
        if name != "YAML" or isinstance(document, dict):
            return document
        failures.append("YAML: not a mapping")     # a bare YAML scalar is what any text decodes to
    raise PolicyError(f"neither JSON, TOML nor YAML ({'; '.join(failures)})")


def load_text(text: str, source: str, suffix: str | None = None) -> Policy:
    """Decode and validate a policy text. :raises PolicyError: naming the problem."""
    return parse_policy(decode(text, suffix), source)


def load_file(path: str, *, off_hub: bool = False) -> Policy:
    """Read, decode and validate a policy file; ``off_hub``: parse a big one in gevent's thread pool (the
    watcher, inside a serving worker). :raises PolicyError: unreadable, too big or invalid."""
    data = _read(path)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PolicyError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    suffix = Path(path).suffix
    if off_hub and len(data) > _OFF_HUB_BYTES:
        policy: Policy = gevent.get_hub().threadpool.apply(_load_named, (text, path, suffix))
        return policy
    return _load_named(text, path, suffix)


def _load_named(text: str, path: str, suffix: str) -> Policy:
    try:
        return load_text(text, path, suffix)
    except PolicyError as exc:
        message = str(exc)
        raise PolicyError(message if message.startswith(path) else f"{path}: {message}") from None


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if len(data) > MAX_BYTES:
        raise PolicyError(f"{path}: larger than {MAX_BYTES} bytes")
    return data


def _signature(path: str) -> Signature | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_mtime_ns, stat.st_size, stat.st_ino)


# --------------------------------------------------------------------------- start-up check
def check_policy(settings: Settings) -> None:
    """Fail the start on an invalid inline policy or an invalid/unreadable policy file (called by the
    master, ``gunicorn.conf.py`` and ``shoal``, right after ``load_settings``).

    :raises ConfigError: naming the key and the problem.
    """
    inline, path = settings.acl_policy, settings.acl_policy_file
    try:
        if inline:
            load_text(inline, "acl.policy")
        elif path:
            load_file(path)
    except PolicyError as exc:
        raise ConfigError(f"{_INLINE if inline else _FILE}: {exc}") from None


# --------------------------------------------------------------------------- the source
class PolicySource:
    """The current policy (``None``: no policy, everything allowed) and, for a file, its watcher."""

    def __init__(self, settings: Settings, *, poll_interval: float = POLL_INTERVAL) -> None:
        """Load the policy now. :raises ConfigError: invalid inline policy, invalid or unreadable file."""
        self._path = None if settings.acl_policy else settings.acl_policy_file
        self._interval = poll_interval
        self._greenlet: gevent.Greenlet[Any, Any] | None = None
        self._policy: Policy | None = None
        self._seen: Signature | None = None        # the file's signature at the last poll
        self._applied: Signature | None = None     # the signature of the content last loaded (or refused)
        self.reloads = 0                      # successful reloads since start (tests, diagnostics)
        self._listeners: list[Callable[[], None]] = []
        self.last_error: str | None = None    # why the last reload was refused, None after a good one
        try:
            if settings.acl_policy:
                self._policy = load_text(settings.acl_policy, "acl.policy")
            elif self._path:
                self._seen = self._applied = _signature(self._path)
                self._policy = load_file(self._path)
        except PolicyError as exc:
            raise ConfigError(f"{_INLINE if settings.acl_policy else _FILE}: {exc}") from None

    @property
    def policy(self) -> Policy | None:
        return self._policy

    def subscribe(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after each swap (in the watcher's greenlet): open streams resync at once
        (``app.streams.hub``) instead of at their next event."""
        self._listeners.append(listener)

    @property
    def path(self) -> str | None:
        """The watched file; None for an inline policy or none at all."""
        return self._path

    def start(self) -> None:
        if self._path is None or self._greenlet is not None:
            return
        self._greenlet = gevent.spawn(self._watch)
        log.info("acl policy file watched", extra={"policy_file": self._path,
                                                    "grants": len(self._policy.grants) if self._policy else 0})

    def stop(self) -> None:
        greenlet, self._greenlet = self._greenlet, None
        if greenlet is not None:
            greenlet.kill(timeout=1.0)

    def _watch(self) -> None:
        while True:
            gevent.sleep(self._interval)
            try:
                self.poll()
            except Exception:   # never let the watcher die: the next poll tries again
                log.exception("acl policy watcher failed", extra={"policy_file": self._path})

    def poll(self) -> None:
        """One look at the file: reload when its signature changed and then held for one interval."""
        assert self._path is not None
        current = _signature(self._path)
        if current != self._seen:
            self._seen = current            # changed: wait one more interval for it to settle
            return
        if current == self._applied:
            return
        self._applied = current
        if current is None:
            self.last_error = "the file is gone"
            log.warning("acl policy file removed, keeping the previous policy",
                        extra={"policy_file": self._path, "reason": self.last_error})
            return
        try:
            policy = load_file(self._path, off_hub=True)
        except PolicyError as exc:
            self.last_error = str(exc)
            log.warning("acl policy reload failed, keeping the previous policy: %s", exc,
                        extra={"policy_file": self._path, "reason": self.last_error})
            return
        self._policy = policy               # one assignment: requests see the old or the new policy
        self.reloads += 1
        self.last_error = None
        log.info("acl policy reloaded (%d grants)", len(policy.grants),
                 extra={"policy_file": self._path, "grants": len(policy.grants)})
        for listener in list(self._listeners):
            listener()
