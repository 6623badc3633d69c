// The live link of a page: one EventSource per tab (the page's own stream, data-stream on <main>).
// On a change it refetches the page's live blocks as fragments (Shoal-Fragment) and swaps them in; the
// freshness indicator shows live / stale / reconnecting and the engine's last contact.
// EventSource reconnects by itself after a drop (sending Last-Event-ID), but gives up for good on an answer
// that is not a 200 event stream (a proxy's 502 while Shoal restarts): then a new one is opened with backoff,
// passing the last id as ?lastEventId= so the replay is exact.

const TYPES = ["node", "service", "task", "config", "secret", "network", "volume", "stack", "batch", "sync",
  "recommendation"];
const MIN_GAP_MS = 250;     // at most ~4 fragment refreshes a second, the last change always shown
const listeners = new Set();
let main, indicator, source, lastId = null, backoff = 1000;
let inflight = false, again = false, lastRefresh = 0, timer = null;

/** Call fn(type, data) on every change event of the page's stream (data parsed; arrays for batches). */
export function onChange(fn) { listeners.add(fn); return () => listeners.delete(fn); }

export function setState(state, contact) {
  if (!indicator) return;
  indicator.dataset.state = state;
  indicator.querySelector(".state").textContent = state;
  main?.classList.toggle("stale", state !== "live" && state !== "syncing");
  if (contact) {
    let span = indicator.querySelector(".contact");
    if (!span) { span = document.createElement("span"); span.className = "contact"; indicator.append(span); }
    const time = document.createElement("time");
    time.dateTime = contact;
    time.textContent = contact.slice(11, 19);
    span.replaceChildren("· engine ", time);
  }
}

function blockNames() {
  return [...new Set([...document.querySelectorAll("[data-block]")].map((el) => el.dataset.block))];
}

/** Refetch the live blocks now (or right after the one in flight). */
export async function refresh() {
  const names = blockNames();
  if (!names.length) return;
  if (inflight) { again = true; return; }
  inflight = true;
  lastRefresh = performance.now();
  try {
    const response = await fetch(location.href, {
      headers: { Accept: "text/html", "Shoal-Fragment": names.join(",") }, credentials: "same-origin",
    });
    const fresh = response.headers.get("Cache-Freshness");
    if (fresh && source?.readyState === EventSource.OPEN) {
      setState(fresh, response.headers.get("Engine-Last-Contact"));
    }
    const tag = response.headers.get("Shoal-Page-Tag");
    if (tag && main) main.dataset.etag = tag;
    const holder = document.createElement("template");
    holder.innerHTML = await response.text();
    for (const part of holder.content.querySelectorAll("template[data-block]")) {
      for (const target of document.querySelectorAll(`[data-block="${part.dataset.block}"]`)) {
        if (target.contains(document.activeElement) && document.activeElement.matches("input, textarea, select")) {
          continue;   // never replace what the operator is typing in
        }
        target.replaceChildren(part.content.cloneNode(true));
      }
    }
    document.dispatchEvent(new CustomEvent("shoal:refreshed"));
  } catch (err) {
    console.warn("refresh failed", err);
  } finally {
    inflight = false;
    if (again) { again = false; schedule(); }
  }
}

function schedule() {
  if (timer) return;
  const wait = Math.max(0, MIN_GAP_MS - (performance.now() - lastRefresh));
  timer = setTimeout(() => { timer = null; refresh(); }, wait);
}

function onEvent(event) {
  if (event.lastEventId) lastId = event.lastEventId;
  let data = null;
  try { data = JSON.parse(event.data); } catch { /* keepalive-like frames carry no JSON */ }
  for (const fn of listeners) fn(event.type, data);
  schedule();
}

function connect() {
  const url = new URL(main.dataset.stream, location.href);
  if (lastId) url.searchParams.set("lastEventId", lastId);
  source = new EventSource(url, { withCredentials: true });
  source.onopen = () => {
    backoff = 1000;
    setState(indicator?.dataset.state === "stale" ? "stale" : "live");
    schedule();   // whatever happened while the link was down
  };
  source.onerror = () => {
    if (source.readyState === EventSource.CLOSED) {
      setState("reconnecting");
      setTimeout(connect, backoff);
      backoff = Math.min(backoff * 2, 15000);
    } else {
      setState("reconnecting");
    }
  };
  for (const type of TYPES) source.addEventListener(type, onEvent);
}

export function start() {
  main = document.querySelector("main");
  indicator = document.getElementById("freshness");
  if (!main?.dataset.stream) return;
  connect();
  addEventListener("pagehide", () => source?.close());
}
