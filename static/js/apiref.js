// The API reference (/api): narrows the operations as you type (the server does the same for ?q= without
// script), keeps ?q= in the address bar, and opens the <details> an anchor (#op-… / #schema-…) points at.

function opened(hash) {
  if (!hash || hash.length < 2) return;
  const target = document.getElementById(decodeURIComponent(hash.slice(1)));
  if (target instanceof HTMLDetailsElement) {
    target.open = true;
    target.scrollIntoView({ block: "start" });
  }
}

function narrow(query, count) {
  const words = query.trim().toLowerCase().split(/\s+/).filter(Boolean);
  let shown = 0;
  for (const section of document.querySelectorAll(".api-tag")) {
    let inSection = 0;
    for (const op of section.querySelectorAll("details.op")) {
      const text = op.dataset.text || "";
      const match = words.every((w) => text.includes(w));
      op.classList.toggle("api-hidden", !match);
      if (match) inSection += 1;
    }
    section.classList.toggle("api-hidden", inSection === 0);
    shown += inSection;
  }
  if (count) count.textContent = `${shown} operation${shown === 1 ? "" : "s"}`;
}

export function init() {
  const form = document.querySelector("form[data-api-ref]");
  const input = form?.querySelector("input[name=q]");
  const count = document.getElementById("api-count");
  if (input) {
    let timer = null;
    input.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => {
        narrow(input.value, count);
        const url = new URL(location.href);
        if (input.value.trim()) url.searchParams.set("q", input.value.trim());
        else url.searchParams.delete("q");
        history.replaceState(null, "", url);
      }, 80);
    });
  }
  // the links inside closed <details> (a response's schema) land on a closed schema: open it
  addEventListener("hashchange", () => opened(location.hash));
  document.addEventListener("click", (event) => {
    const link = event.target.closest?.("a[href^='#']");
    if (link) opened(link.getAttribute("href"));
  });
  opened(location.hash);
}
