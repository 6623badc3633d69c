// The command palette: Ctrl-K / Cmd-K (or "/" when not typing, or typing in the header's search box) opens a
// modal <dialog> whose combobox queries /search (JSON, debounced, the previous request aborted) and lists
// the hits beside static commands (each navigation page, the theme switch). Arrow keys move, Enter opens,
// Escape closes. Without script the header's box is a plain GET form to the /search page.
// ARIA: the input is a combobox owning a listbox; the active option is aria-activedescendant, so focus
// never leaves the input.

const DEBOUNCE_MS = 120;
const PER_KIND = 5;            // /search limit: hits kept per kind
const MAX_LENGTH = 200;        // longer queries are a 400 (SEA002): never sent
const KINDS = {
  services: "Service", stacks: "Stack", nodes: "Node", tasks: "Task", configs: "Config", secrets: "Secret",
  networks: "Network", volumes: "Volume",
};

let base = "";
let dialog, input, list, status;
let commands = [];   // {kind, label, href?, run?}
let hits = [];       // search results of the current query
let shown = [];      // what the listbox shows, in order
let active = -1;
let timer = null;
let controller = null;
let asked = 0;       // number of the latest query: a late answer of an older one is dropped
let opener = null;

function element(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (key.startsWith("aria-") || key === "role" || key === "for") node.setAttribute(key, value);
    else node[key] = value;
  }
  node.append(...children);
  return node;
}

function build() {
  const link = element("link", { rel: "stylesheet", href: `${base}/static/css/palette.css` });
  document.head.append(link);
  input = element("input", {
    id: "palette-input", type: "text", role: "combobox", "aria-expanded": "false",
    "aria-controls": "palette-list", "aria-autocomplete": "list", autocomplete: "off", spellcheck: false,
    maxLength: MAX_LENGTH, placeholder: "Search the cluster, or type a page or command",
  });
  list = element("ul", { id: "palette-list", role: "listbox", "aria-label": "Results and commands" });
  status = element("p", { id: "palette-status", className: "palette-status", role: "status" });
  dialog = element("dialog", { id: "palette", className: "palette", "aria-labelledby": "palette-title" },
    element("h2", { id: "palette-title", className: "visually-hidden" }, "Command palette"),
    element("label", { for: "palette-input", className: "visually-hidden" }, "Search or run a command"),
    input, list, status,
    element("p", { className: "palette-help" }, "↑ ↓ move · Enter open · Esc close"));
  document.body.append(dialog);

  input.addEventListener("input", onInput);
  input.addEventListener("keydown", onKey);
  list.addEventListener("mousedown", (event) => event.preventDefault());   // keep the focus in the input
  list.addEventListener("click", (event) => {
    const option = event.target.closest("[role=option]");
    if (option) run(shown[Number(option.dataset.index)]);
  });
  list.addEventListener("mousemove", (event) => {
    const option = event.target.closest("[role=option]");
    if (option && Number(option.dataset.index) !== active) select(Number(option.dataset.index));
  });
  dialog.addEventListener("close", () => {
    controller?.abort();
    clearTimeout(timer);
    if (opener && document.contains(opener)) opener.focus();
  });
  dialog.addEventListener("click", (event) => { if (event.target === dialog) dialog.close(); });  // backdrop
}

function staticCommands() {
  const found = [];
  for (const link of document.querySelectorAll("header.top nav a[href]")) {
    found.push({ kind: "Page", label: link.textContent.trim(), href: link.href });
  }
  found.push({ kind: "Command", label: "Toggle dark / light theme",
    run: () => document.getElementById("theme-toggle")?.click() });
  return found;
}

function query() {
  return input.value.trim();
}

function compose() {
  const q = query().toLowerCase();
  const matching = q ? commands.filter((c) => c.label.toLowerCase().includes(q)) : commands;
  shown = [...hits, ...matching];
  if (q) shown.push({ kind: "Search", label: `All results for “${query()}”`, href: `${base}/search?q=${encodeURIComponent(query())}&limit=10` });
  render();
}

function render() {
  const options = shown.map((item, index) => {
    const parts = [element("span", { className: "palette-kind" }, item.kind),
      element("span", { className: "palette-label" }, item.label)];
    if (item.detail) parts.push(element("span", { className: "palette-detail" }, item.detail));
    if (item.state) {
      parts.push(element("span", { className: `state state-${item.state.toLowerCase()}` }, item.state));
    }
    return element("li", { id: `palette-opt-${index}`, role: "option", "aria-selected": "false" }, ...parts);
  });
  options.forEach((option, index) => { option.dataset.index = String(index); });
  list.replaceChildren(...options);
  list.hidden = options.length === 0;      // an empty listbox is not announced
  input.setAttribute("aria-expanded", String(options.length > 0));
  select(options.length ? 0 : -1);
}

function select(index) {
  const options = list.querySelectorAll("[role=option]");
  if (active >= 0 && options[active]) options[active].setAttribute("aria-selected", "false");
  active = index;
  if (index >= 0 && options[index]) {
    options[index].setAttribute("aria-selected", "true");
    input.setAttribute("aria-activedescendant", options[index].id);
    options[index].scrollIntoView({ block: "nearest" });
  } else {
    input.removeAttribute("aria-activedescendant");
  }
}

function run(item) {
  if (!item) return;
  if (item.run) {
    dialog.close();
    item.run();
  } else if (item.href) {
    opener = null;                       // leaving the page: no focus to give back
    dialog.close();
    location.assign(item.href);
  }
}

function onKey(event) {
  const count = shown.length;
  if (event.key === "ArrowDown" && count) {
    event.preventDefault();
    select((active + 1) % count);
  } else if (event.key === "ArrowUp" && count) {
    event.preventDefault();
    select((active - 1 + count) % count);
  } else if (event.key === "Home" && count && event.ctrlKey) {
    event.preventDefault();
    select(0);
  } else if (event.key === "End" && count && event.ctrlKey) {
    event.preventDefault();
    select(count - 1);
  } else if (event.key === "Enter") {
    event.preventDefault();
    run(shown[active]);
  }
}

function onInput() {
  clearTimeout(timer);
  controller?.abort();
  hits = [];
  if (!query()) {
    status.textContent = "";
    compose();
    return;
  }
  compose();                                   // the commands answer at once, the hits follow
  timer = setTimeout(search, DEBOUNCE_MS);
}

async function search() {
  const q = query();
  if (!q) return;
  const mine = ++asked;
  controller = new AbortController();
  status.textContent = "Searching…";
  try {
    const response = await fetch(`${base}/search?q=${encodeURIComponent(q)}&limit=${PER_KIND}`, {
      headers: { Accept: "application/json" }, credentials: "same-origin", signal: controller.signal,
    });
    const body = await response.json().catch(() => null);
    if (mine !== asked) return;
    if (!response.ok) {
      hits = [];
      status.textContent = body?.detail || body?.title || `Search failed (${response.status})`;
    } else {
      hits = [];
      for (const [kind, items] of Object.entries(body.results || {})) {
        for (const hit of items) {
          hits.push({ kind: KINDS[kind] || kind, label: hit.name || hit.id, detail: hit.detail || "",
            state: hit.state || "", href: hit["@id"] });
        }
      }
      status.textContent = body.total ? `${body.total} match${body.total === 1 ? "" : "es"}` : "Nothing matches";
    }
    compose();
  } catch (error) {
    if (error.name !== "AbortError" && mine === asked) status.textContent = "Search failed";
  }
}

/** Open the palette (with some text already typed), or focus it when it is open. */
export function open(text = "") {
  if (!dialog.open) {
    opener = document.activeElement;
    commands = staticCommands();
    hits = [];
    input.value = text;
    dialog.showModal();
    onInput();
  }
  input.focus();
}

function typing(target) {
  return target instanceof HTMLElement &&
    (target.isContentEditable || target.matches("input, textarea, select"));
}

function onGlobalKey(event) {
  if ((event.ctrlKey || event.metaKey) && !event.altKey && event.key.toLowerCase() === "k") {
    event.preventDefault();
    if (dialog.open) dialog.close(); else open();
  } else if (event.key === "/" && !event.ctrlKey && !event.metaKey && !event.altKey && !typing(event.target)) {
    event.preventDefault();
    open();
  }
}

export function init() {
  if (dialog) return;
  base = document.querySelector("main")?.dataset.base ?? "";
  build();
  document.addEventListener("keydown", onGlobalKey);
  const top = document.getElementById("top-search");
  if (top) {
    top.addEventListener("input", () => {   // typing in the header's box continues in the palette
      const text = top.value;
      top.value = "";
      open(text);
    });
  }
}
