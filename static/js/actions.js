// The write controls (templates/macros/actions.html): a button opens a <dialog> holding a form[data-write].
// Preview first: the API's own dry run (?dryRun=true, same method, body and If-Match) where it has one, else
// the request itself; Apply then sends it with If-Match (the page's ETag, kept current by live.js) when the
// form writes the page's own object, and Prefer: wait for service writes (rollout shown while it runs).
// Removals need the object's name typed. A 412 shows the object as it is now; any problem shows its title,
// detail and code. Server data is only ever set as text (textContent), never parsed as HTML.
import { onChange, refresh } from "./live.js";

const WAIT_SECONDS = 120;          // Prefer: wait=N (the API holds the answer until the rollout settles)
const PROGRESS_GAP_MS = 1000;      // at most one progress read a second while a rollout runs

export function init() {
  stylesheet();
  for (const bar of document.querySelectorAll("[data-actions]")) bar.hidden = false;
  for (const button of document.querySelectorAll("[data-open]")) {
    button.addEventListener("click", () => open(document.getElementById(button.dataset.open)));
  }
  for (const form of document.querySelectorAll("form[data-write]")) wire(form);
}

/** The controls' CSS, linked once by the script that shows them (the bars stay hidden without it). */
function stylesheet() {
  const href = `${main()?.dataset.base || ""}/static/css/actions.css`;
  if (document.querySelector(`link[href="${href}"]`)) return;
  const link = document.createElement("link");
  link.rel = "stylesheet";
  link.href = href;
  document.head.append(link);
}

function wire(form) {
  const dialog = form.closest("dialog");
  form.addEventListener("submit", (event) => { event.preventDefault(); preview(form); });
  form.addEventListener("input", (event) => {
    if (event.target.matches("[data-confirm-input]")) updateApply(form);   // typing the name keeps the preview
    else invalidate(form);
  });
  form.querySelector("[data-apply]")?.addEventListener("click", () => apply(form));
  form.querySelector("[data-close]")?.addEventListener("click", () => dialog?.close());
}

async function open(dialog) {
  if (!dialog) return;
  const form = dialog.querySelector("form[data-write]");
  output(form).replaceChildren();
  invalidate(form);
  dialog.showModal();
  if (form.dataset.source) await loadSource(form);
}

/** A label or env editor starts from the value the API has now (not the page's possibly older copy). */
async function loadSource(form) {
  const area = form.querySelector("[data-kv]");
  try {
    const res = await fetch(form.dataset.source, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    const body = await parse(res);
    if (!res.ok) { showProblem(form, res, body); return; }
    const map = (body && body[form.dataset.key]) || {};
    form._original = map;
    if (area) area.value = Object.entries(map).map(([k, v]) => `${k}=${v}`).join("\n");
  } catch (err) {
    say(form, `Could not read the current value: ${err.message}`, "bad");
  }
}

function output(form) { return form.querySelector(".act-preview"); }

function invalidate(form) {
  form._request = null;
  updateApply(form);
}

function updateApply(form) {
  const button = form.querySelector("[data-apply]");
  if (!button) return;
  const confirm = form.dataset.confirm;
  const typed = form.querySelector("[data-confirm-input]")?.value ?? "";
  button.disabled = !form._request || form._busy || (confirm !== undefined && typed !== confirm);
}

// ------------------------------------------------------------------------------------------ the request
function parseLines(text) {
  const map = {};
  for (const line of (text || "").split("\n")) {
    if (!line.trim() || line.trimStart().startsWith("#")) continue;
    const at = line.indexOf("=");
    const key = (at < 0 ? line : line.slice(0, at)).trim();
    if (key) map[key] = at < 0 ? "" : line.slice(at + 1);
  }
  return map;
}

function base64(text) {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function fields(form) {
  const body = {};
  for (const el of form.elements) {
    if (!el.name || el.dataset.query !== undefined || el.dataset.kv !== undefined) continue;
    const kind = el.dataset.json;
    if (kind === "bool") { body[el.name] = el.checked; continue; }
    const value = el.value;
    if (kind === "int" || kind === "int-or-skip") {
      if (value.trim() === "" && kind === "int-or-skip") continue;
      const n = Number(value);
      if (!Number.isInteger(n)) throw new Error(`${el.name} must be a whole number`);
      body[el.name] = n;
    } else if (kind === "base64") {
      body[el.name] = base64(value);
    } else if (kind === "kv") {
      const map = parseLines(value);
      if (Object.keys(map).length) body[el.name] = map;
    } else if (value !== "") {
      body[el.name] = value;
    }
  }
  return body;
}

/** The merge patch (RFC 7396) from the value read when the dialog opened to the edited lines. */
function kvPatch(form) {
  const before = form._original || {};
  const after = parseLines(form.querySelector("[data-kv]")?.value);
  const patch = {};
  for (const key of Object.keys(before)) if (!(key in after)) patch[key] = null;
  for (const [key, value] of Object.entries(after)) if (before[key] !== value) patch[key] = value;
  return patch;
}

function build(form) {
  const url = new URL(form.dataset.url, location.href);
  for (const el of form.querySelectorAll("[data-query]")) if (el.checked) url.searchParams.set(el.name, el.value);
  const headers = { Accept: "application/json" };
  let body;
  if (form.dataset.body === "fields") body = JSON.stringify(fields(form));
  else if (form.dataset.body === "kv-patch") body = JSON.stringify(kvPatch(form));
  if (body !== undefined) headers["Content-Type"] = form.dataset.type || "application/json";
  return { method: form.dataset.method, url, headers, body };
}

function main() { return document.querySelector("main"); }

/** If-Match only for the page's own object: the page's ETag says nothing about another object. */
function ifMatch(form) {
  const page = (main()?.dataset.path || "").replace(/\.html$/, "");
  const target = new URL(form.dataset.object, location.href).pathname;
  return page === target ? main()?.dataset.etag : undefined;
}

function send(request, form, { dryRun = false, wait = false } = {}) {
  const url = new URL(request.url);
  if (dryRun) url.searchParams.set("dryRun", "true");
  const headers = { ...request.headers };
  const tag = ifMatch(form);
  if (tag) headers["If-Match"] = tag;
  if (wait) headers.Prefer = `wait=${WAIT_SECONDS}`;
  return fetch(url, { method: request.method, headers, body: request.body, credentials: "same-origin" });
}

async function parse(res) {
  const text = await res.text();
  if (!text) return null;
  try { return JSON.parse(text); } catch { return null; }
}

// ------------------------------------------------------------------------------------------ preview, apply
async function preview(form) {
  if (form._busy) return;
  let request;
  try {
    request = build(form);
  } catch (err) {
    say(form, err.message, "bad");
    return;
  }
  busy(form, true);
  try {
    if (request.method === "PATCH" && !(await patchAccepted(form, request))) return;
    if (form.dataset.dryRun !== undefined) {
      const res = await send(request, form, { dryRun: true });
      const body = await parse(res);
      if (res.status === 412) { await conflict(form); return; }
      if (!res.ok) { showProblem(form, res, body); return; }
      showDryRun(form, body);
    } else {
      showRequest(form, request);
    }
    form._request = request;
  } catch (err) {
    say(form, `The preview failed: ${err.message}`, "bad");
  } finally {
    busy(form, false);
  }
}

/** A PATCH goes out only with a Content-Type the URL lists in Accept-Patch. */
async function patchAccepted(form, request) {
  const res = await fetch(request.url, { headers: { Accept: "application/json" }, credentials: "same-origin" });
  await res.text();   // read to the end: only the header counts, but a dropped body logs as aborted
  const types = (res.headers.get("Accept-Patch") || "").split(",").map((t) => t.trim()).filter(Boolean);
  if (types.includes(request.headers["Content-Type"])) return true;
  say(form, `This URL does not accept ${request.headers["Content-Type"]} now (Accept-Patch: ${types.join(", ") || "none"}).`, "bad");
  return false;
}

async function apply(form) {
  const request = form._request;
  if (!request || form._busy) return;
  const wait = form.dataset.wait !== undefined;
  busy(form, true);
  const stop = wait ? watchRollout(form) : () => {};
  say(form, wait ? "Applying; waiting for the rollout to settle…" : "Applying…", "muted");
  try {
    const res = await send(request, form, { wait });
    const body = await parse(res);
    stop();
    if (res.status === 412) { await conflict(form); return; }
    if (!res.ok) { showProblem(form, res, body); return; }
    done(form, res, body);
  } catch (err) {
    stop();
    say(form, `The request failed: ${err.message}. The write may or may not have been applied: check the object.`, "bad");
  } finally {
    form._request = null;
    busy(form, false);
  }
}

function done(form, res, body) {
  const tag = res.headers.get("ETag");
  if (tag && ifMatch(form) !== undefined && form.dataset.method !== "DELETE") main().dataset.etag = tag;
  const after = form.dataset.after;
  if (after === "location" && res.headers.get("Location")) { location.assign(res.headers.get("Location")); return; }
  if (after && form.dataset.method === "DELETE") { location.assign(after); return; }
  const out = output(form);
  out.replaceChildren(line(`Done (${res.status}).`, "ok"));
  const rollout = body?.rollout;
  if (rollout) {
    const parts = [`rollout ${rollout.state}`, rollout.settled ? "settled" : "not settled"];
    if (rollout.desiredTasks !== undefined) parts.push(`${rollout.runningTasks ?? 0} of ${rollout.desiredTasks} tasks running`);
    parts.push(`after ${rollout.waitedSeconds} s`);
    out.append(line(parts.join(", "), rollout.settled ? "ok" : "warn"));
    if (rollout.message) out.append(line(rollout.message, "muted"));
  }
  refresh();
}

/** While Prefer: wait holds the answer: running of desired tasks, read on the page's change events. */
function watchRollout(form) {
  const out = output(form);
  const meter = document.createElement("progress");
  meter.setAttribute("aria-label", "Rollout progress");
  const text = line("", "muted");
  out.replaceChildren(line("Waiting for the rollout to settle…", "muted"), meter, text);
  let last = 0, pending = false;
  const read = async () => {
    if (pending || performance.now() - last < PROGRESS_GAP_MS) return;
    pending = true;
    last = performance.now();
    try {
      const res = await fetch(form.dataset.object, { headers: { Accept: "application/json" }, credentials: "same-origin" });
      const service = (await parse(res))?.service;
      const desired = service?.Spec?.Mode?.Replicated?.Replicas;
      const running = service?.RunningTasks;
      if (typeof desired === "number" && typeof running === "number") {
        meter.max = Math.max(desired, 1);
        meter.value = Math.min(running, meter.max);
        text.textContent = `${running} of ${desired} tasks running` +
          (service.UpdateStatus?.State ? `; update ${service.UpdateStatus.State}` : "");
      }
    } catch { /* progress is best effort: the answer still comes */ } finally { pending = false; }
  };
  return onChange(read);
}

async function conflict(form) {
  const out = output(form);
  out.replaceChildren(line("The object changed since this page was read (412): nothing was written. " +
    "Here it is as it is now; preview again to see what your change would do to it.", "bad"));
  try {
    const res = await fetch(form.dataset.object, { headers: { Accept: "application/json" }, credentials: "same-origin" });
    const body = await parse(res);
    const tag = res.headers.get("ETag");
    if (res.ok && tag && ifMatch(form) !== undefined) main().dataset.etag = tag;
    if (body) {
      const details = document.createElement("details");
      const summary = document.createElement("summary");
      summary.textContent = "The object now";
      const pre = document.createElement("pre");
      pre.className = "json";
      pre.textContent = JSON.stringify(body, null, 2);
      details.append(summary, pre);
      out.append(details);
    }
  } catch { /* the message above stands */ }
  form._request = null;
  refresh();
}

// ------------------------------------------------------------------------------------------ rendering
function line(text, tone) {
  const p = document.createElement("p");
  p.textContent = text;
  if (tone) p.className = `act-${tone}`;
  return p;
}

function say(form, text, tone) { output(form).replaceChildren(line(text, tone)); }

function busy(form, on) {
  form._busy = on;
  form.setAttribute("aria-busy", String(on));
  updateApply(form);
}

function showProblem(form, res, body) {
  const box = document.createElement("div");
  box.className = "problem";
  box.setAttribute("role", "alert");
  const head = document.createElement("p");
  const strong = document.createElement("strong");
  strong.textContent = body?.title || `${res.status} ${res.statusText}`;
  head.append(strong);
  if (body?.code) {
    const code = document.createElement("code");
    code.textContent = body.code;
    head.append(" ", code);
  }
  box.append(head);
  if (body?.detail) box.append(line(body.detail));
  const accepted = res.headers.get("Accept-Patch");
  if (res.status === 415 && accepted) box.append(line(`Accept-Patch: ${accepted}`));
  output(form).replaceChildren(box);
}

function text(value) {
  if (value === undefined) return "—";
  return typeof value === "string" ? value : JSON.stringify(value);
}

function showDryRun(form, body) {
  const out = output(form);
  out.replaceChildren(line(`Dry run: ${body?.summary || "no summary"}. Nothing was written yet.`));
  const changes = body?.changes || [];
  if (changes.length) {
    const table = document.createElement("table");
    table.className = "list act-diff";
    const caption = table.createCaption();
    caption.textContent = "What would change";
    const head = table.createTHead().insertRow();
    for (const label of ["Field", "Now", "After"]) {
      const th = document.createElement("th");
      th.scope = "col";
      th.textContent = label;
      head.append(th);
    }
    const rows = table.createTBody();
    for (const change of changes) {
      const row = rows.insertRow();
      const field = document.createElement("th");
      field.scope = "row";
      field.textContent = change.field;
      row.append(field);
      const old = row.insertCell();
      old.className = "act-old";
      old.textContent = text(change.old);
      const now = row.insertCell();
      now.className = "act-new";
      now.textContent = text(change.new);
    }
    out.append(table);
    if (body.changesOmitted) out.append(line(`…and ${body.changesOmitted} more.`, "muted"));
  }
  if (body?.removes?.length) {
    out.append(line("Would remove:"));
    const list = document.createElement("ul");
    for (const gone of body.removes) {
      const item = document.createElement("li");
      item.textContent = `${gone.type} ${gone.name || gone.id}`;
      list.append(item);
    }
    out.append(list);
  }
  if (body?.creates) {
    const pre = document.createElement("pre");
    pre.className = "json";
    pre.textContent = JSON.stringify(body.creates.spec, null, 2);
    out.append(line(`Would create this ${body.creates.type}:`), pre);
  }
  if (body?.note) out.append(line(body.note, "muted"));
  if (form.dataset.confirm !== undefined) out.append(line(`Type ${form.dataset.confirm} above, then Apply.`, "muted"));
}

function showRequest(form, request) {
  const pre = document.createElement("pre");
  pre.className = "json";
  const tag = ifMatch(form);
  pre.textContent = `${request.method} ${request.url.pathname}${request.url.search}` +
    (tag ? `\nIf-Match: ${tag}` : "") +
    (request.body !== undefined ? `\nContent-Type: ${request.headers["Content-Type"]}\n\n${request.body}` : "");
  output(form).replaceChildren(line("This write has no dry run; it would send:"), pre);
}
