"""The one exception type for client-visible errors, and the registry of stable error codes.

Every layer (query, cache, engine boundary, HTTP) raises ``ProblemError(code, detail)``; the HTTP layer
renders it as ``application/problem+json``. The registry also serves ``/api/errors``, so documentation
and behaviour cannot drift apart. Codes are stable identifiers: never renumber, only append.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ErrorDef:
    code: str
    status: int
    title: str
    description: str
    suggestion: str


def _defs(*rows: tuple[str, int, str, str, str]) -> dict[str, ErrorDef]:
    return {row[0]: ErrorDef(*row) for row in rows}


REGISTRY: dict[str, ErrorDef] = _defs(
    # API: protocol and content negotiation
    ("API001", 406, "Event stream not available",
     "text/event-stream was requested from an endpoint that does not stream.",
     "Request application/json, or open the stream on a list, detail or /events URL."),
    ("API002", 406, "Endpoint is stream-only",
     "This endpoint only produces text/event-stream.",
     "Send Accept: text/event-stream."),
    ("API003", 406, "Not acceptable",
     "None of the media types in Accept (or the path extension) can be produced here.",
     "Use application/json, application/vnd.service.v1+json or text/html."),
    ("API004", 415, "Unsupported patch media type",
     "PATCH needs application/json-patch+json or application/merge-patch+json.",
     "Set Content-Type to one of the types listed in Accept-Patch."),
    ("API005", 500, "Streaming not supported", "The response writer cannot stream.",
     "Report this; it is a server configuration problem."),
    ("API006", 400, "Invalid request body", "The body does not decode to the expected shape.",
     "Check the request body against the OpenAPI document at /api."),
    ("API007", 400, "Unreadable request body", "The request body could not be read.",
     "Resend the request."),
    ("API008", 400, "Body is not JSON", "The patch body is not valid JSON.", "Send a JSON document."),
    ("API009", 500, "Serialisation failed", "The response could not be serialised.",
     "Report this with the Request-Id."),
    ("API010", 409, "JSON Patch test failed", "A JSON Patch test operation did not match.",
     "Re-read the resource and retry."),
    ("API011", 400, "JSON Patch not applicable", "The JSON Patch cannot be applied.",
     "Use add, replace, remove or test on existing keys."),
    ("API012", 400, "Invalid query parameter", "A query parameter has an invalid value.",
     "Check the parameter against the OpenAPI document at /api."),
    ("API013", 503, "Server busy",
     "Too many requests are waiting for the worker, or this one waited too long, so it was not served.",
     "Retry after the number of seconds in Retry-After."),
    ("API014", 413, "Request body too large", "The request body is larger than 1 MiB.",
     "Send a smaller body."),
    ("API015", 400, "Body nested too deeply",
     "The JSON body nests arrays and objects deeper than 64 levels; no write body needs that many.",
     "Send a flatter document."),
    ("API016", 400, "Invalid If-Match",
     "If-Match is neither * nor a comma-separated list of quoted entity tags (RFC 9110 §13.1.1); a list "
     "that mixes * with tags is malformed too.",
     "Send the ETag a GET returned, e.g. If-Match: \"<etag>\", or * alone."),
    ("API017", 400, "Reserved label",
     "The write adds, changes or removes a com.docker.stack.* label of an existing object: stack membership "
     "belongs to docker stack deploy, and stack grants of the ACL rest on it.",
     "Keep the com.docker.stack.* labels as they are (send them back unchanged in a PUT), or redeploy the stack."),
    ("API018", 400, "Write exceeds a bound",
     "The write asks for more than one write may ask here (replicas, labels, environment entries, patch "
     "operations or string length); the problem names the field, the limit and the requested value.",
     "Ask for at most the limit, or have the operator raise the setting the problem names."),
    ("API019", 400, "Invalid Idempotency-Key",
     "The Idempotency-Key header is not a string of 1 to 255 visible ASCII characters.",
     "Send e.g. Idempotency-Key: \"8e03978e-40d5-43e8-bc93-6894a57f9324\"."),
    ("API020", 422, "Idempotency-Key reused",
     "This Idempotency-Key was used for a different request (another method, URL, body or caller).",
     "Use a fresh key for a new request; resend the original request unchanged to get its answer."),
    ("API021", 409, "Idempotent request in progress",
     "A request with this Idempotency-Key is still being processed.",
     "Retry after the number of seconds in Retry-After; the first request's answer is then replayed."),
    ("API022", 400, "Dry run not supported",
     "dryRun=true was asked of a write that has no dry run (swarm token, unlock-key and CA rotations, unlock, "
     "the unlock-key read, plugin privileges, install and upgrade); nothing was checked or written.",
     "Send the write without dryRun to perform it, or check its preconditions by reading the object."),
    # AUT: authentication
    ("AUT001", 401, "Authentication required",
     "The request carries no valid credentials (session, bearer token or peer identity).",
     "Log in at /auth/login or send a valid token, as the WWW-Authenticate header describes."),
    ("AUT002", 403, "Identity provider refused",
     "The identity provider refused the login or the presented identity.",
     "Check the account with the identity provider's administrator, then log in again."),
    ("AUT003", 400, "Invalid login callback",
     "The login callback failed its checks (state, nonce, issuer or authorised party), e.g. after the flow expired.",
     "Start the login again from /auth/login."),
    ("AUT004", 500, "Login failed",
     "The login could not be completed because of an internal failure.",
     "Retry the login; report it with the Request-Id if it persists."),
    ("AUT005", 403, "Cross-site write refused",
     "A POST, PUT, PATCH or DELETE carrying a browser's session cookie came without an Origin of this service "
     "(or of server.cors.origins), nor Sec-Fetch-Site: same-origin; nothing was read or written.",
     "Send writes from this service's pages, or authenticate API clients with a token instead of a cookie."),
    # ACL: authorization
    ("ACL001", 403, "Read access denied", "The caller may not read this resource.",
     "Ask an administrator for a read grant."),
    ("ACL002", 403, "Write access denied", "The caller may not change this resource.",
     "Ask an administrator for a write grant."),
    # OPS: operations level
    ("OPS001", 403, "Operations level too low",
     "The endpoint needs a higher operations level than the service is configured for.",
     "Raise server.operations_level if this change should be allowed."),
    # FLT: filter expressions
    ("FLT001", 400, "Filter too long", "The filter expression is longer than 512 characters.",
     "Shorten the expression."),
    ("FLT002", 400, "Filter syntax error", "The filter expression does not parse.",
     "Check the expression near the reported position; operators are CEL's."),
    ("FLT003", 400, "Filter evaluation failed", "The filter expression failed while evaluating an item.",
     "Check operand types, e.g. compare integers with integers."),
    ("FLT004", 400, "Unknown filter field", "The filter names a field this resource kind does not have.",
     "Use one of the fields listed for this kind in the documentation."),
    ("FLT005", 400, "Filter is not boolean", "The filter expression does not produce true or false.",
     "Compare values, e.g. slot > 1, instead of returning a value."),
    ("FLT006", 400, "Filter too costly",
     "The filter needs more work than one request may spend: its evaluation ran over the per-request "
     "budget, or a matches() pattern is too large for the regular-expression engine's memory budget.",
     "Narrow the filter (e.g. compare fields with constants first) or simplify its matches() patterns."),
    # SEA: search
    ("SEA001", 400, "Search query missing", "The q parameter of /search is missing or blank.",
     "Pass a non-empty q, e.g. /search?q=web."),
    ("SEA002", 400, "Search query too long", "The q parameter is longer than 200 characters.",
     "Shorten q to at most 200 characters."),
    # MTR: metrics
    ("MTR001", 503, "Prometheus not configured", "Metrics were requested but no Prometheus URL is configured.",
     "Set prometheus.url (SERVICE_PROMETHEUS_URL) to enable metrics."),
    ("MTR002", 502, "Prometheus unavailable",
     "Prometheus could not be reached or answered with a non-2xx status.",
     "Check /metrics/status and the Prometheus server, then retry."),
    ("MTR003", 400, "Metrics query missing", "The query parameter (PromQL) is missing.",
     "Pass a PromQL expression in query."),
    ("MTR004", 400, "Invalid metrics step", "The stream step is not an integer number of seconds from 5 to 300.",
     "Use a step between 5 and 300 seconds, or omit it for the default of 15."),
    ("MTR005", 429, "Too many metrics streams", "The cap of concurrent metrics streams is reached.",
     "Retry after the number of seconds in Retry-After."),
    ("MTR006", 400, "Label name missing", "A label-values request names no label.",
     "Put the label name in the path, e.g. /metrics/labels/job."),
    ("MTR007", 500, "Metrics request not buildable", "The request to Prometheus could not be built.",
     "Check the Prometheus URL configured; report it with the Request-Id if it persists."),
    # LOG: log streaming
    ("LOG001", 429, "Too many log streams", "The cap of concurrent log streams is reached.",
     "Retry after the number of seconds in Retry-After."),
    ("LOG002", 400, "Invalid log stream", "The stream parameter is neither stdout nor stderr.",
     "Use stream=stdout or stream=stderr, or omit it for both."),
    ("LOG003", 400, "Invalid after", "The after parameter is neither an RFC 3339 timestamp nor a duration.",
     "Use a timestamp such as 2024-01-02T15:04:05Z or a duration such as 1h30m."),
    ("LOG004", 400, "Invalid before", "The before parameter is neither an RFC 3339 timestamp nor a duration.",
     "Use a timestamp such as 2024-01-02T15:04:05Z or a duration such as 1h30m."),
    ("LOG005", 400, "before not allowed on a live stream", "The before parameter was given on a live log stream.",
     "Drop before, or request the logs as JSON instead of text/event-stream."),
    ("LOG006", 500, "Log read failed", "The container engine failed to return the logs.",
     "Retry; report it with the Request-Id if it persists."),
    ("LOG007", 500, "Log frames unparsable", "The log frames returned by the container engine could not be parsed.",
     "Retry; report it with the Request-Id if it persists."),
    ("LOG008", 500, "Log stream not opened", "The live log stream could not be opened on the container engine.",
     "Retry; report it with the Request-Id if it persists."),
    # SSE: SSE connections
    ("SSE001", 429, "Too many event streams", "The cap of concurrent event streams is reached.",
     "Retry after the number of seconds in Retry-After."),
    ("SSE002", 400, "Unknown event type",
     "The types parameter of /events names a type that has no events.",
     "Use a comma list of node, service, task, config, secret, network, volume, stack."),
    ("SSE003", 403, "Cross-origin stream refused",
     "A page on an origin that server.cors.origins does not allow opened an event stream.",
     "Serve the page from this service's origin, or add its origin to server.cors.origins."),
    # ENG: container engine
    ("ENG001", 503, "Engine unavailable",
     "The container engine is unreachable, or the cache has not finished its first sync.",
     "Retry shortly; /-/ready tells when the service is in sync."),
    ("ENG002", 503, "Release lookup failed", "The latest container engine release could not be looked up.",
     "Retry later; the lookup needs outbound network access."),
    ("ENG003", 400, "Engine rejected the request", "The container engine rejected the arguments.",
     "Check the values sent."),
    ("ENG004", 500, "Engine error", "The container engine failed in an unexpected way.",
     "Retry; report it with the Request-Id if it persists."),
    ("ENG005", 504, "Write outcome unknown",
     "The engine did not answer the write in time (or the connection dropped after the request was sent): "
     "the write may have been applied, or may still be.",
     "GET the object (or /history for it) to see whether the change happened; or retry with the same "
     "Idempotency-Key, which cannot apply it twice."),
    # SWM: cluster operations
    ("SWM001", 501, "Swarm API unavailable",
     "The container engine is not a swarm manager, so the swarm API is not available.",
     "Point the service at a manager node's engine."),
    ("SWM002", 503, "Swarm inspect failed", "The swarm could not be inspected.",
     "Retry shortly; check that the engine is a healthy manager."),
    ("SWM003", 500, "Swarm update failed", "The container engine failed to update the swarm.",
     "Re-read /swarm and retry; report it with the Request-Id if it persists."),
    ("SWM004", 501, "Disk usage unsupported", "The container engine does not report disk usage.",
     "Use an engine version that supports the disk-usage API."),
    ("SWM005", 500, "Disk usage failed", "The container engine failed to report disk usage.",
     "Retry; report it with the Request-Id if it persists."),
    ("SWM006", 500, "Token rotation failed", "The container engine failed to rotate the join token.",
     "Retry; report it with the Request-Id if it persists."),
    ("SWM007", 500, "Unlock-key rotation failed", "The container engine failed to rotate the unlock key.",
     "Retry; report it with the Request-Id if it persists."),
    ("SWM008", 500, "Unlock failed", "The container engine failed to unlock the swarm with the given key.",
     "Check the unlock key and retry."),
    ("SWM009", 500, "Unlock key not readable", "The swarm unlock key could not be read from the engine.",
     "Retry; check that autolock is enabled on the swarm."),
    ("SWM010", 400, "Unlock key missing", "The unlock request has no unlockKey.",
     "Send {\"unlockKey\": \"SWMKEY-1-...\"}."),
    ("SWM011", 400, "Invalid token target", "The token rotation target is neither worker nor manager.",
     "Send {\"target\": \"worker\"} or {\"target\": \"manager\"}."),
    ("SWM012", 409, "Swarm version conflict", "The swarm settings were changed by another client since they were read.",
     "Re-read /swarm and retry."),
    # PLG: plugin operations
    ("PLG001", 500, "Plugin listing failed", "The container engine failed to list the plugins.",
     "Retry; report it with the Request-Id if it persists."),
    ("PLG002", 400, "Plugin remote missing", "The request body has no remote plugin reference.",
     "Send {\"remote\": \"<image reference>\"}, e.g. vieux/sshfs:latest."),
    ("PLG003", 500, "Plugin privilege check failed",
     "The container engine failed to fetch the privileges the remote plugin asks for.",
     "Check the remote reference and registry access, then retry."),
    ("PLG004", 404, "Plugin not installed", "No plugin with this name is installed.",
     "List /plugins for installed names."),
    # NOD: node operations
    ("NOD001", 409, "Node not down", "The node is still up, so it cannot be removed without force.",
     "Drain the node and wait until it is down, or repeat with force=true."),
    ("NOD002", 409, "Node version conflict", "The node was changed by another client since it was read.",
     "Re-read the node and retry."),
    ("NOD003", 404, "Node not found", "No node with this id is in the cache.",
     "List /nodes for valid ids."),
    ("NOD004", 400, "Invalid node availability", "The availability is not active, pause or drain.",
     "Send {\"availability\": \"active\"}, \"pause\" or \"drain\"."),
    ("NOD005", 400, "Invalid node role", "The role is neither worker nor manager.",
     "Send {\"role\": \"worker\"} or {\"role\": \"manager\"}."),
    # SVC: service operations
    ("SVC001", 409, "Service version conflict", "The service was changed by another client since it was read.",
     "Re-read the service and retry."),
    ("SVC002", 409, "Service still in use",
     "The service is still referenced or is managed by a stack, so it cannot be removed.",
     "Remove the references first, or remove the whole stack."),
    ("SVC003", 404, "Service not found", "No service with this id is in the cache.",
     "List /services for valid ids."),
    ("SVC004", 400, "Replicas missing", "The scale request has no replicas value.",
     "Send {\"replicas\": <non-negative integer>}."),
    ("SVC005", 400, "Global service not scalable", "A global service runs one task per node and cannot be scaled.",
     "Switch the service to replicated mode first, or leave it global."),
    ("SVC006", 400, "Image missing", "The image request has no or an empty image.",
     "Send {\"image\": \"<reference>\"}, e.g. nginx:1.27."),
    ("SVC007", 400, "No previous spec", "The service has no previous spec to roll back to.",
     "Update the service instead of rolling it back."),
    ("SVC008", 400, "Invalid service mode", "The mode is neither replicated nor global.",
     "Send {\"mode\": \"replicated\", \"replicas\": n} or {\"mode\": \"global\"}."),
    ("SVC009", 400, "Replicas required", "Replicated mode was requested without replicas.",
     "Add replicas, e.g. {\"mode\": \"replicated\", \"replicas\": 3}."),
    ("SVC010", 400, "Invalid endpoint mode", "The endpoint mode is neither vip nor dnsrr.",
     "Send {\"mode\": \"vip\"} or {\"mode\": \"dnsrr\"}."),
    ("SVC011", 400, "Invalid resources", "The resource limits or reservations are invalid.",
     "Check Limits and Reservations (NanoCPUs, MemoryBytes, Pids) against the OpenAPI document."),
    ("SVC012", 400, "Invalid update policy", "The update policy is invalid.",
     "Check FailureAction (pause, continue, rollback), Order (stop-first, start-first) and the numbers."),
    ("SVC013", 400, "Invalid rollback policy", "The rollback policy is invalid.",
     "Check FailureAction (pause, continue, rollback), Order (stop-first, start-first) and the numbers."),
    ("SVC014", 400, "Invalid healthcheck", "The healthcheck is invalid.",
     "Check Test, the durations (nanoseconds) and Retries."),
    ("SVC015", 400, "Invalid config reference", "A config reference has neither a config id nor a name.",
     "Give each entry a configID or configName."),
    ("SVC016", 400, "Invalid secret reference", "A secret reference has neither a secret id nor a name.",
     "Give each entry a secretID or secretName."),
    ("SVC017", 400, "Invalid network attachment", "A network attachment has no target.",
     "Give each entry a target network id."),
    ("SVC018", 400, "Invalid container settings", "The container settings are invalid.",
     "Check the fields of container-config against the OpenAPI document."),
    ("SVC019", 400, "Invalid log driver", "The log driver settings are invalid.",
     "Send a Name and string Options, e.g. {\"Name\": \"json-file\"}."),
    # TSK: task operations
    ("TSK001", 409, "Task already gone", "The task no longer exists on the engine.",
     "Re-read /tasks; the scheduler may already have replaced it."),
    ("TSK002", 404, "Task not found", "No task with this id is in the cache.", "List /tasks for valid ids."),
    ("TSK003", 409, "Task container not reachable",
     "The task has no container on the engine this service talks to, so it cannot be removed from here.",
     "Remove it on its node, or scale or restart the service instead."),
    # STK: stack operations
    ("STK001", 404, "Stack not found", "No stack with this name is in the cache.",
     "List /stacks for valid names."),
    # VOL: volume operations
    ("VOL001", 409, "Volume in use", "The volume is in use by a container, so it cannot be removed without force.",
     "Remove the containers using it, or repeat with force=true."),
    ("VOL002", 404, "Volume not found", "No volume with this name is in the cache.",
     "List /volumes for valid names."),
    ("VOL003", 400, "Invalid volume", "The volume create body is invalid (name, driver, labels or options).",
     "Send {\"name\": \"...\", \"driver\": \"local\"}."),
    # NET: network operations
    ("NET001", 409, "Network in use", "The network still has active endpoints, so it cannot be removed.",
     "Detach the services and containers using it first."),
    ("NET002", 404, "Network not found", "No network with this id is in the cache.",
     "List /networks for valid ids."),
    ("NET003", 409, "Network name taken", "A network with this name already exists.",
     "Choose another name, or remove the existing network first."),
    ("NET004", 400, "Invalid network", "The network create body is invalid (name, driver, labels or options).",
     "Send {\"name\": \"...\", \"driver\": \"overlay\"}."),
    # CFG: config operations
    ("CFG001", 409, "Config in use", "The config is used by services, so it cannot be removed.",
     "Remove it from those services first."),
    ("CFG002", 404, "Config not found", "No config with this id is in the cache.",
     "List /configs for valid ids."),
    ("CFG003", 409, "Config name taken", "A config with this name already exists.",
     "Choose another name, or remove the existing config first."),
    ("CFG004", 400, "Invalid config", "The config has an empty name or its data is not valid base64.",
     "Send {\"name\": \"...\", \"data\": \"<base64>\"}."),
    ("CFG005", 409, "Config version conflict", "The config was changed by another client since it was read.",
     "Re-read the config and retry."),
    # SEC: secret operations
    ("SEC001", 409, "Secret in use", "The secret is used by services, so it cannot be removed.",
     "Remove it from those services first."),
    ("SEC002", 404, "Secret not found", "No secret with this id is in the cache.",
     "List /secrets for valid ids."),
    ("SEC003", 409, "Secret name taken", "A secret with this name already exists.",
     "Choose another name, or remove the existing secret first."),
    ("SEC004", 400, "Invalid secret", "The secret has an empty name or its data is not valid base64.",
     "Send {\"name\": \"...\", \"data\": \"<base64>\"}."),
    ("SEC005", 409, "Secret version conflict", "The secret was changed by another client since it was read.",
     "Re-read the secret and retry."),
)


class ProblemError(Exception):
    """A client-visible error with a registered code; rendered as RFC 9457 problem+json.

    ``extra`` adds members to the problem body (e.g. ``position`` for filter errors).
    """

    def __init__(
        self,
        code: str,
        detail: str | None = None,
        *,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
        status: int | None = None,
    ) -> None:
        definition = REGISTRY[code]  # KeyError here is a programming error: codes are registered
        super().__init__(f"{code}: {detail or definition.title}")
        self.code = code
        self.status = status or definition.status   # e.g. 412 with a domain code (If-Match)
        self.title = definition.title
        self.detail = detail or definition.description
        self.headers = headers or {}
        self.extra = extra or {}
