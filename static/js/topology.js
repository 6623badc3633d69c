// Topology page: a "fit / actual size" toggle for the Graphviz drawing (large graphs are unreadable when
// scaled to the page width). The drawing is replaced on every live refresh, the toggle's choice is kept.
let actual = false;

function apply() {
  for (const holder of document.querySelectorAll(".topology-svg")) holder.classList.toggle("actual", actual);
  for (const figure of document.querySelectorAll("[data-topology]")) {
    if (!figure.querySelector(".topology-svg")) continue;
    const caption = figure.querySelector("figcaption");
    let button = caption?.querySelector("button.zoom");
    if (caption && !button) {
      button = document.createElement("button");
      button.type = "button";
      button.className = "zoom";
      button.addEventListener("click", () => { actual = !actual; apply(); });
      caption.append(button);
    }
    if (button) {
      button.textContent = "Actual size";   // a toggle: the name stays, aria-pressed says which
      button.setAttribute("aria-pressed", String(actual));
    }
  }
}

export function init() {
  apply();
  document.addEventListener("shoal:refreshed", apply);
}
