"""Who can reach what the configuration allows: the loud start-up warnings and ``/-/ready``'s
``unauthenticatedWrites``.

The defaults are the peer's and stay (``auth.mode = none``, operations level 1, every interface), but with
them anyone who can reach the port may scale, restart, roll back and remove tasks, anonymously. That is
said once at start, as one WARNING line, whenever writes are allowed without authentication on an address
other than loopback (a unix socket counts as local), and shown in ``/-/ready`` for as long as it holds.
A trusted-proxy CIDR that trusts every address (``0.0.0.0/0``, ``::/0``) gets its own warning.

The listening addresses are what the server really binds (gunicorn's ``bind``, which ``-b`` and
``GUNICORN_CMD_ARGS`` override), not only ``server.listen_addr``.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Iterable

from app.config.settings import Settings

log = logging.getLogger(__name__)

EVERY_ADDRESS = frozenset({"0.0.0.0/0", "::/0"})


def is_local(bind: str) -> bool:
    """A bind address only this host can reach: loopback (``127.0.0.0/8``, ``::1``, ``localhost``) or a
    unix socket. Anything else, including a host name, counts as reachable from elsewhere."""
    if bind.startswith("unix:"):
        return True
    host = bind.rsplit(":", 1)[0] if not bind.startswith("[") else bind[1:].split("]", 1)[0]
    if host == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    mapped = address.ipv4_mapped if isinstance(address, ipaddress.IPv6Address) else None
    return (mapped or address).is_loopback


def unauthenticated_writes(settings: Settings, binds: Iterable[str]) -> bool:
    """Writes allowed to anonymous callers on an address other hosts can reach."""
    return settings.auth_mode == "none" and settings.operations_level >= 1 \
        and any(not is_local(bind) for bind in binds)


def warn_exposure(settings: Settings, binds: Iterable[str]) -> None:
    """The start-up warnings (once per start: gunicorn's master, the ``shoal`` command)."""
    binds = list(binds)
    if unauthenticated_writes(settings, binds):
        exposed = [bind for bind in binds if not is_local(bind)]
        log.warning("writes are allowed WITHOUT AUTHENTICATION on %s: auth.mode = none and operations level %d, "
                    "so anyone who can reach the port may scale, restart, roll back and remove tasks; set "
                    "auth.mode, set server.operations_level = 0, or listen on 127.0.0.1",
                    ", ".join(exposed), settings.operations_level,
                    extra={"event": "unauthenticated_writes", "listen": exposed,
                           "operations_level": settings.operations_level, "auth_mode": settings.auth_mode})
    everyone = sorted(EVERY_ADDRESS.intersection(settings.trusted_proxies))
    if everyone:
        log.warning("server.trusted_proxies contains %s: every peer is trusted as the proxy%s",
                    ", ".join(everyone),
                    "" if settings.headers_secret_header else
                    " and no shared secret is set, so anyone who can reach the port may claim any identity",
                    extra={"event": "trusted_proxies_everyone", "trusted_proxies": everyone})
