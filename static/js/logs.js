// Log pages (templates/pages/logs/*, element [data-logs]): Follow over the log URL's own SSE tail (the tab's
// only stream: these pages set no data-stream), Pause (keeps receiving into a bounded buffer), search
// highlight, stream filter, auto-scroll that stops while the operator reads older lines, a bounded list.
// Reconnects by itself with backoff and ?lastEventId=<last line's timestamp> (docs/logs.md: the tail starts
// right after it): EventSource's own retry would resend the first URL, whose since= would replay lines.

const BUFFER_MAX = 5000;   // lines kept while paused; older ones are dropped (and counted)
const NEAR_BOTTOM = 40;    // px from the end that still counts as "reading the newest line"
const FLUSH_MS = 50;       // new lines are appended in batches
const SEARCH_MS = 120;
const LOCAL = ["q", "only", "follow"];   // page-only parameters, not the API's

let root, list, stateEl, noteEl, countEl, followBtn, pauseBtn, bottomBtn, search, onlyBox, streamSelect, form;
let source = null, retryTimer = null, lastId = null, backoff = 1000;
let following = false, paused = false, stick = true;
let pending = [], buffered = [], dropped = 0, flushTimer = null, max = 5000;

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function setParam(name, value) {
  const url = new URL(location.href);
  if (value) url.searchParams.set(name, value); else url.searchParams.delete(name);
  history.replaceState(history.state, "", url);
  const json = document.querySelector("a.log-download");
  if (json) json.href = apiUrl(".json").href;
}

/** The log URL (plus a suffix) with the API's parameters of the current address. */
function apiUrl(suffix = "") {
  const url = new URL(root.dataset.tail + suffix, location.href);
  for (const [key, value] of new URL(location.href).searchParams) {
    if (!LOCAL.includes(key) && value) url.searchParams.append(key, value);
  }
  return url;
}

function setState(state) {
  stateEl.dataset.state = state;
  stateEl.textContent = state;
}

function note(text) { noteEl.textContent = text; }

function labelOf(attrs) {
  if (!attrs.serviceName) return String(attrs.taskId || "-").slice(0, 12);
  const slot = attrs.slot ?? String(attrs.nodeId || "-").slice(0, 12);
  return `${attrs.serviceName}.${slot}`;
}

/** Mark the matches of q in a line's text; returns whether it matched (the element's class says so too). */
function highlight(li, q) {
  const textEl = li.querySelector(".text");
  const text = textEl.textContent;
  const low = text.toLowerCase(), ql = q.toLowerCase();
  const hit = q !== "" && low.includes(ql);
  li.classList.toggle("hit", hit);
  if (!hit || low.length !== text.length) {
    if (textEl.childElementCount) textEl.textContent = text;
    return hit;
  }
  const parts = [];
  let at = 0;
  for (let found = low.indexOf(ql); found !== -1; found = low.indexOf(ql, at)) {
    if (found > at) parts.push(text.slice(at, found));
    parts.push(el("mark", "", text.slice(found, found + ql.length)));
    at = found + ql.length;
  }
  if (at < text.length) parts.push(text.slice(at));
  textEl.replaceChildren(...parts);
  return hit;
}

function lineElement(line) {
  const li = el("li");
  const stream = line.stream === "stderr" ? "stderr" : "stdout";
  li.dataset.out = stream;
  const time = el("time", "", String(line.timestamp || "").slice(11, 23));
  time.dateTime = line.timestamp;
  time.title = line.timestamp;
  li.append(time, el("span", `out out-${stream}`, stream));
  if ("showTask" in root.dataset) {
    const attrs = line.attrs || {};
    let task;
    if (attrs.taskId) {
      task = el("a", "task", labelOf(attrs));
      task.title = task.textContent;
      task.href = `${document.querySelector("main").dataset.base}/tasks/${encodeURIComponent(attrs.taskId)}`;
    } else {
      task = el("span", "task", labelOf(attrs));
    }
    li.append(task);
  }
  const text = el("span", "text", line.message ?? "");
  if (line.json && typeof line.json === "object") {
    const details = el("details", "msg");
    const summary = el("summary");
    summary.append(text);
    details.append(summary, el("pre", "", JSON.stringify(line.json, null, 2)));
    li.append(details);
  } else {
    const msg = el("span", "msg");
    msg.append(text);
    li.append(msg);
  }
  if (search.value) highlight(li, search.value);
  return li;
}

function atBottom() { return list.scrollHeight - list.scrollTop - list.clientHeight < NEAR_BOTTOM; }

function toBottom() {
  list.scrollTop = list.scrollHeight;
  stick = true;
  bottomBtn.hidden = true;
}

function updateCount() {
  const n = list.childElementCount;
  countEl.textContent = `${n} line${n === 1 ? "" : "s"} shown`;
  root.querySelector(".log-range")?.remove();   // the snapshot's range no longer describes the list
}

/** Drop the oldest lines beyond the bound, keeping what the operator reads in place. */
function trim() {
  const extra = list.childElementCount - max;
  if (extra <= 0) return;
  const gone = [...list.children].slice(0, extra);
  const height = stick ? 0 : gone.reduce((sum, li) => sum + li.offsetHeight, 0);
  for (const li of gone) li.remove();
  if (height) list.scrollTop -= height;
}

function flush() {
  flushTimer = null;
  if (!pending.length) return;
  const batch = pending;
  pending = [];
  const fragment = document.createDocumentFragment();
  for (const line of batch) fragment.append(lineElement(line));
  document.querySelector(".log-empty")?.remove();
  list.append(fragment);
  trim();
  if (stick) toBottom(); else bottomBtn.hidden = false;
  updateCount();
}

function receive(line) {
  if (paused) {
    buffered.push(line);
    if (buffered.length > BUFFER_MAX + 500) {   // drop in slices, not one shift per line
      dropped += buffered.length - BUFFER_MAX;
      buffered = buffered.slice(-BUFFER_MAX);
    }
    note(`${buffered.length + dropped} new line${buffered.length + dropped === 1 ? "" : "s"} while paused`);
    return;
  }
  pending.push(line);
  if (pending.length > max) pending = pending.slice(-max);
  if (!flushTimer) flushTimer = setTimeout(flush, FLUSH_MS);
}

function tailUrl() {
  const url = new URL(root.dataset.tail, location.href);
  if (root.dataset.streamParam) url.searchParams.set("stream", root.dataset.streamParam);
  if (lastId) url.searchParams.set("lastEventId", lastId);
  else if (root.dataset.cursor) url.searchParams.set("since", root.dataset.cursor);
  return url;
}

function open() {
  retryTimer = null;
  source = new EventSource(tailUrl(), { withCredentials: true });
  source.onopen = () => {
    backoff = 1000;
    setState(paused ? "paused" : "following");
  };
  source.onmessage = (event) => {
    if (event.lastEventId) lastId = event.lastEventId;
    let line;
    try { line = JSON.parse(event.data); } catch { return; }
    if (line && typeof line === "object") receive(line);
  };
  source.onerror = () => {
    // A drop (network, proxy), the tail's end at a worker restart (":shutdown"), or a refusal (429 at
    // the cap): reopen after a growing pause from the last line seen, whatever the browser would do.
    source?.close();
    source = null;
    if (!following) return;
    setState("reconnecting");
    retryTimer = setTimeout(open, backoff);
    backoff = Math.min(backoff * 2, 15000);
  };
}

function close() {
  if (retryTimer) clearTimeout(retryTimer);
  retryTimer = null;
  source?.close();
  source = null;
}

function setPaused(value) {
  paused = value;
  pauseBtn.setAttribute("aria-pressed", String(paused));
  pauseBtn.textContent = paused ? "Resume" : "Pause";
  if (paused) {   // lines received but not yet appended wait too: nothing appears after the click
    if (flushTimer) clearTimeout(flushTimer);
    flushTimer = null;
    buffered = pending;
    pending = [];
  } else {
    const lost = dropped;
    pending = pending.concat(buffered);
    buffered = [];
    dropped = 0;
    note(lost ? `${lost} older line${lost === 1 ? "" : "s"} dropped while paused (buffer full)` : "");
    if (pending.length && !flushTimer) flushTimer = setTimeout(flush, 0);
  }
  if (following) setState(paused ? "paused" : (source?.readyState === EventSource.OPEN ? "following" : "reconnecting"));
}

function setFollowing(value) {
  following = value;
  followBtn.setAttribute("aria-pressed", String(following));
  pauseBtn.disabled = !following;
  setParam("follow", following ? "1" : "");
  if (following) {
    setState("reconnecting");
    open();
  } else {
    close();
    if (paused) setPaused(false);
    setState("stopped");
  }
}

function applySearch() {
  const q = search.value;
  let hits = 0;
  for (const li of list.children) if (highlight(li, q)) hits += 1;
  root.classList.toggle("only-hits", Boolean(q) && onlyBox.checked);
  note(q ? `${hits} matching line${hits === 1 ? "" : "s"}` : "");
  setParam("q", q);
  setParam("only", onlyBox.checked ? "1" : "");
}

function applyStream() {
  const chosen = streamSelect.value;
  if (root.dataset.streamParam) {
    // the page holds only that stream's lines: another choice needs the server's answer
    if (chosen !== root.dataset.streamParam) form.requestSubmit();
    return;
  }
  if (chosen) root.dataset.show = chosen; else delete root.dataset.show;
  setParam("stream", chosen);
  if (stick) toBottom();
}

async function downloadText(button) {
  button.disabled = true;
  try {
    const response = await fetch(apiUrl(), { headers: { Accept: "text/plain" }, credentials: "same-origin" });
    if (!response.ok) { note(`download failed: ${response.status}`); return; }
    const name = /filename="([^"]+)"/.exec(response.headers.get("Content-Disposition") || "")?.[1] || "logs.log";
    const link = el("a");
    link.href = URL.createObjectURL(await response.blob());
    link.download = name;
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10000);
  } catch (err) {
    note(`download failed: ${err}`);
  } finally {
    button.disabled = false;
  }
}

export function init() {
  root = document.querySelector("[data-logs]");
  if (!root) return;
  list = root.querySelector("ol.log-lines");
  stateEl = root.querySelector(".log-state");
  noteEl = root.querySelector(".log-note");
  countEl = root.querySelector(".log-count");
  followBtn = root.querySelector("[data-log-follow]");
  pauseBtn = root.querySelector("[data-log-pause]");
  bottomBtn = root.querySelector("[data-log-bottom]");
  form = document.querySelector("form.log-controls");
  search = form.querySelector("#log-q");
  onlyBox = form.querySelector("input[name=only]");
  streamSelect = form.querySelector("#log-stream");
  max = Number(root.dataset.max) || max;

  root.querySelector(".log-tools").hidden = false;
  const textButton = document.querySelector("[data-log-text]");
  if (textButton) {
    textButton.hidden = false;
    textButton.addEventListener("click", () => downloadText(textButton));
  }
  toBottom();
  list.addEventListener("scroll", () => {
    stick = atBottom();
    if (stick) bottomBtn.hidden = true;
  }, { passive: true });
  bottomBtn.addEventListener("click", toBottom);
  followBtn.addEventListener("click", () => setFollowing(!following));
  pauseBtn.addEventListener("click", () => setPaused(!paused));
  let searchTimer = null;
  search.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(applySearch, SEARCH_MS);
  });
  onlyBox.addEventListener("change", applySearch);
  streamSelect.addEventListener("change", applyStream);
  addEventListener("pagehide", close);
  if ("follow" in root.dataset) setFollowing(true);
}
