// Dark and light themes: the choice is remembered per browser; without one the system's preference holds.
const KEY = "shoal.theme";

export function initTheme() {
  const root = document.documentElement;
  const saved = localStorage.getItem(KEY);
  if (saved === "dark" || saved === "light") root.dataset.theme = saved;
  const button = document.getElementById("theme-toggle");
  if (!button) return;
  const current = () => root.dataset.theme || (matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light");
  const label = () => button.setAttribute("aria-pressed", String(current() === "dark"));
  label();
  button.addEventListener("click", () => {
    const next = current() === "dark" ? "light" : "dark";
    root.dataset.theme = next;
    localStorage.setItem(KEY, next);
    label();
  });
}
