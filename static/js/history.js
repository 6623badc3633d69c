// History lists ([data-history]: /history, /events, the overview's recent changes): after a live refresh
// (live.js's "shoal:refreshed"), records not shown before flash (class "changed", keyed by data-seq) and a
// polite status says how many arrived, so a reader sees what just happened without comparing lists.
let seen = null;

function records() {
  return [...document.querySelectorAll("[data-history] [data-seq]")];
}

function announce(count) {
  const status = document.querySelector("[data-history-status]");
  if (status) status.textContent = `${count} new change${count === 1 ? "" : "s"}`;
}

export function init() {
  if (seen) return;   // once per page, however often it is imported
  seen = new Set(records().map((el) => el.dataset.seq));
  document.addEventListener("shoal:refreshed", () => {
    let fresh = 0;
    for (const el of records()) {
      if (seen.has(el.dataset.seq)) continue;
      seen.add(el.dataset.seq);
      el.classList.add("changed");
      fresh += 1;
    }
    if (fresh) announce(fresh);
  });
}
