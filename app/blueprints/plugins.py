"""``/plugins`` (alias ``/swarm/plugins``) and ``/plugins/{name}``: the engine's managed plugins
(docs/swarm-and-plugins.md), and their gated writes: enable/disable and settings at tier 2; privileges of a
remote, install, upgrade and removal at tier 3.

Thin views over :mod:`app.engine.plugins`. Plugins are per engine and not cached, so every view waits on
the engine: the whole blueprint is exempt from the admission gate. ``{name}`` is the plugin's name as the
engine knows it (``sshfs:latest``; the tag may be left out) or its id; a name with a slash
(``vieux/sshfs:latest``) cannot be one path segment, so such plugins are addressed by id (their ``@id``).
"""

from __future__ import annotations

from typing import Any

from flask import Response, request
from flask.views import MethodView
from flask_smorest import Blueprint

from app.blueprints.docs import errors, write_documented
from app.engine.plugins import PluginEngine
from app.engine.swarm import EngineCalls, Raw
from app.errors import ProblemError
from app.http import admission, respond, writes
from app.http.acl import current_access
from app.http.acl_read import require_key
from app.http.jsonld import envelope
from app.http.negotiation import negotiated
from app.runtime import app_engine
from app.schemas.v1.swarm import PluginCollectionV1, PluginV1, PrivilegesV1
from app.writes import dry_run
from app.writes.operations import MERGE_PATCH

blp = Blueprint("plugins", __name__, description="The engine's managed plugins (gated writes).")
admission.exempt(blp)
ENGINE_KEY = "shoal.plugin_engine"
_READ_ERRORS = {503: "The engine is unreachable (ENG001).", 404: "No plugin with this name or id (PLG004)."}
_REMOTE = {"type": "string", "minLength": 1, "description": "plugin image reference, e.g. vieux/sshfs:latest"}
_PRIVILEGES = {"type": "array", "description": "privileges to grant; default: every privilege the remote asks "
                                               "for (POST /plugins/privileges shows them)",
               "items": {"type": "object", "properties": {"Name": {"type": "string"},
                                                          "Description": {"type": "string"},
                                                          "Value": {"type": "array", "items": {"type": "string"}}}}}


def plugin_engine() -> PluginEngine:
    """One per app, made on first use (inside the worker)."""
    return app_engine(ENGINE_KEY, PluginEngine,
                      lambda settings: PluginEngine(EngineCalls(settings.docker_host, settings.docker_api_version)))


def plugin_path(plugin: Raw) -> str:
    """``/plugins/<Name>``, or ``/plugins/<Id>`` when the name has a slash (not one path segment)."""
    name = str(plugin.get("Name") or "")
    return f"/plugins/{name}" if name and "/" not in name else f"/plugins/{plugin.get('Id') or name}"


def detail(plugin: Raw, *, status: int = 200) -> Response:
    body = envelope(respond.base_path(), plugin_path(plugin), "Plugin")
    body["plugin"] = plugin
    return respond.document(body, status=status)


def collection() -> Response:
    """Every plugin the caller may read (``plugin:<Name>``: filtered, no grant needed)."""
    base, access = respond.base_path(), current_access()
    items = [{"@id": base + plugin_path(p), "@type": "Plugin", **p} for p in plugin_engine().all()
             if access.allows("read", "plugin", str(p.get("Name") or p.get("Id") or ""))]
    body = envelope(base, request.path, "Collection")
    body.update(items=items, total=len(items), limit=len(items), offset=0)
    return respond.document(body)


def _remote(body: dict[str, Any]) -> str:
    remote = body.get("remote")
    if not isinstance(remote, str) or not remote.strip():
        raise ProblemError("PLG002", detail="The body needs remote, a plugin image reference "
                                            "(e.g. vieux/sshfs:latest).")
    return remote.strip()


def _privileges(body: dict[str, Any]) -> list[Raw] | None:
    granted = body.get("privileges")
    if granted is None:
        return None
    if not isinstance(granted, list) or not all(isinstance(p, dict) for p in granted):
        raise ProblemError("API006", detail="privileges must be an array of {Name, Description, Value} objects.")
    return granted


def _object_body() -> dict[str, Any]:
    body = writes.json_body(required=False)
    return writes.require_object(body) if body is not None else {}


def _toggle_dry_run(op: Any, name: str, enabled: bool) -> Response:
    """What enable/disable would do: 404 PLG004, 409 ENG003 when it already is (as the engine answers)."""
    found = plugin_engine().inspect(name)
    if bool(found.get("Enabled")) is enabled:
        raise ProblemError("ENG003", detail=f"Plugin {found.get('Name')} is already "
                                            f"{'enabled' if enabled else 'disabled'}.")
    return dry_run.plugin(op, found, plugin_path(found), [("Enabled", bool(found.get("Enabled")), enabled)])


def _settings_changes(plugin: Raw, pairs: list[str]) -> list[tuple[str, Any, Any]]:
    """``Settings.Env`` / ``Settings.Args`` after ``docker plugin set`` with ``pairs``."""
    settings = plugin.get("Settings") or {}
    env = [str(item) for item in settings.get("Env") or []]
    args = list(settings.get("Args") or [])
    args_name = ((plugin.get("Config") or {}).get("Args") or {}).get("Name")
    new_env, new_args = list(env), args
    for pair in pairs:
        key, _, value = pair.partition("=")
        if args_name and key == args_name:
            new_args = value.split()
            continue
        new_env = [item for item in new_env if item.partition("=")[0] != key] + [pair]
    return [("Settings.Env", env, new_env), ("Settings.Args", args, new_args)]


# ---------------------------------------------------------------------------------------------- collection
@blp.route("/plugins")
class Plugins(MethodView):
    @blp.response(200, PluginCollectionV1, description="Every plugin of the engine, unpaginated.")
    @errors(blp, 503, codes={503: "The engine is unreachable (ENG001)."})
    @negotiated()
    def get(self) -> Response:
        return collection()

    @write_documented(blp, "install_plugin", returns=PluginV1, success=201, description=(
        "Install (pull) a plugin from a registry, granting the given privileges (default: all it asks for), "
        "then enable it unless disabled is true. 201 + Location. 400 PLG002 without remote; a registry the "
        "engine cannot reach is 500 ENG004 with the engine's message."), body={
        "type": "object", "required": ["remote"], "properties": {
            "remote": _REMOTE, "name": {"type": "string", "description": "local name (alias); default: remote"},
            "privileges": _PRIVILEGES, "disabled": {"type": "boolean", "description": "leave it disabled"}}})
    def post(self) -> Response:
        op = writes.begin("install_plugin")
        body = _object_body()
        remote, granted = _remote(body), _privileges(body)
        name = body.get("name")
        if name is not None and (not isinstance(name, str) or not name.strip() or "/" in name):
            raise ProblemError("API006", detail="name must be a non-empty string without a slash.")
        plugin = writes.engine_write(op, None, None, lambda: plugin_engine().install(
            remote, name.strip() if isinstance(name, str) else None, granted, enable=not body.get("disabled")))
        return writes.created(plugin_path(plugin), lambda: detail(plugin))


@blp.route("/swarm/plugins")
class SwarmPlugins(MethodView):
    @blp.response(200, PluginCollectionV1, description="Alias of /plugins.")
    @errors(blp, 503, codes={503: "The engine is unreachable (ENG001)."})
    @negotiated()
    def get(self) -> Response:
        return collection()


@blp.route("/plugins/privileges")
class Privileges(MethodView):
    @write_documented(blp, "plugin_privileges", returns=PrivilegesV1, description=(
        "The privileges a remote plugin asks for (what an install would grant). 400 PLG002 without remote; "
        "500 PLG003 when the engine fails to fetch them."), body={
        "type": "object", "required": ["remote"], "properties": {"remote": _REMOTE}})
    def post(self) -> Response:
        op = writes.begin("plugin_privileges")
        remote = _remote(_object_body())
        found = writes.engine_write(op, None, None, lambda: plugin_engine().privileges(remote))
        return writes.answer_document("/plugins/privileges", "PluginPrivileges", {"privileges": found})


# ---------------------------------------------------------------------------------------------- one plugin
@blp.route("/plugins/<name>")
class Plugin(MethodView):
    @blp.response(200, PluginV1, description="The plugin as the engine has it.")
    @errors(blp, 403, 404, 503, codes=_READ_ERRORS)
    @negotiated()
    def get(self, name: str) -> Response:
        plugin = plugin_engine().inspect(name)
        require_key("plugin", str(plugin.get("Name") or name), sent=name)
        return detail(plugin)

    @blp.doc(parameters=[{"in": "query", "name": "force", "schema": {"type": "string", "enum": ["true"]},
                          "required": False}, dry_run.PARAMETER_DOC])   # outside write_documented: kept whole
    @write_documented(blp, "remove_plugin", description=(
        "Remove the plugin; force=true removes an enabled one too. 404 PLG004; 409 ENG003 when it is enabled "
        "or in use (without force)."))
    def delete(self, name: str) -> Response:
        op = writes.begin("remove_plugin")
        force = request.args.get("force") == "true"
        if dry_run.active():
            found = plugin_engine().inspect(name)   # 404 PLG004
            if found.get("Enabled") and not force:
                raise ProblemError("ENG003", detail=f"Plugin {found.get('Name')} is enabled; disable it first, "
                                                    "or pass force=true.")
            return dry_run.plugin(op, found, plugin_path(found), [], removal=True)
        writes.engine_write(op, None, None, lambda: plugin_engine().remove(name, force=force))
        return writes.no_content()


@blp.route("/plugins/<name>/enable")
class Enable(MethodView):
    @write_documented(blp, "enable_plugin", description="Enable the plugin. 404 PLG004; 409 ENG003 if enabled.")
    def post(self, name: str) -> Response:
        op = writes.begin("enable_plugin")
        if dry_run.active():
            return _toggle_dry_run(op, name, True)
        writes.engine_write(op, None, None, lambda: plugin_engine().enable(name))
        return writes.no_content()


@blp.route("/plugins/<name>/disable")
class Disable(MethodView):
    @write_documented(blp, "disable_plugin", description="Disable the plugin. 404 PLG004; 409 ENG003 if disabled "
                                                         "or in use.")
    def post(self, name: str) -> Response:
        op = writes.begin("disable_plugin")
        if dry_run.active():
            return _toggle_dry_run(op, name, False)
        writes.engine_write(op, None, None, lambda: plugin_engine().disable(name))
        return writes.no_content()


@blp.route("/plugins/<name>/upgrade")
class Upgrade(MethodView):
    @write_documented(blp, "upgrade_plugin", returns=PluginV1, description=(
        "Upgrade a disabled plugin to another remote, granting the given privileges (default: all it asks "
        "for). 400 PLG002 without remote; 404 PLG004; 409 ENG003 while enabled."), body={
        "type": "object", "required": ["remote"], "properties": {"remote": _REMOTE, "privileges": _PRIVILEGES}})
    def post(self, name: str) -> Response:
        op = writes.begin("upgrade_plugin")
        body = _object_body()
        remote, granted = _remote(body), _privileges(body)
        plugin_engine().inspect(name)   # 404 PLG004 before anything is downloaded
        plugin = writes.engine_write(op, None, None, lambda: plugin_engine().upgrade(name, remote, granted))
        return writes.minimal_or(lambda: detail(plugin))


@blp.route("/plugins/<name>/settings")
class Settings(MethodView):
    @write_documented(blp, "update_plugin_settings", returns=PluginV1, description=(
        "Set the plugin's args and/or env (docker plugin set; the engine wants it disabled for most settings). "
        "env entries are KEY=value; args replace the plugin's settable args. The body's type is not checked "
        "(application/json works too)."), body={
        "type": "object", "properties": {"args": {"type": "array", "items": {"type": "string"}},
                                         "env": {"type": "array", "items": {"type": "string", "pattern": "="}}},
        "additionalProperties": False})
    def patch(self, name: str) -> Response:
        op = writes.begin("update_plugin_settings")
        if (request.mimetype or "").lower() == MERGE_PATCH:
            body: Any = writes.patch_body(op)[1]
        else:   # JSON, Content-Type not checked
            body = writes.json_body()
        settings = writes.require_object(body)
        unknown = sorted(set(settings) - {"args", "env"})
        if unknown:
            raise ProblemError("API006", detail=f"Unknown member(s) {', '.join(unknown)}; use args and env.")
        for key in ("args", "env"):
            values = settings.get(key)
            if values is not None and (not isinstance(values, list) or not all(isinstance(v, str) for v in values)):
                raise ProblemError("API006", detail=f"{key} must be an array of strings.")
        env = settings.get("env") or []
        if any("=" not in item or item.startswith("=") for item in env):
            raise ProblemError("API006", detail="env entries are KEY=value.")
        engine = plugin_engine()
        plugin = engine.inspect(name)
        pairs = list(env)
        if settings.get("args") is not None:
            args_name = ((plugin.get("Config") or {}).get("Args") or {}).get("Name")
            if not args_name:
                raise ProblemError("ENG003", detail=f"Plugin {plugin.get('Name')} has no settable args.")
            pairs.append(f"{args_name}={' '.join(settings['args'])}")
        if dry_run.active():
            return dry_run.plugin(op, plugin, plugin_path(plugin), _settings_changes(plugin, pairs))
        if pairs:
            writes.engine_write(op, None, None, lambda: engine.configure(name, pairs))
            plugin = engine.inspect(name)
        return writes.minimal_or(lambda: detail(plugin))
