// The page script: loads the modules a page needs (each finds its own elements) and starts the live link.
// No build step: plain ES modules, served as they are (CSP script-src 'self').
import { start } from "./live.js";
import { initTheme } from "./theme.js";

initTheme();
start();
document.documentElement.dataset.ready = "1";   // usable: the page's own script ran (bench/bench_dashboard.py)

const optional = [
  ["[data-palette], #top-search", "./palette.js"],
  ["[data-write]", "./actions.js"],
  ["[data-logs]", "./logs.js"],
  ["[data-chart]", "./charts.js"],
  ["[data-topology]", "./topology.js"],
  ["[data-api-ref]", "./apiref.js"],
  ["[data-history]", "./history.js"],
];
for (const [selector, module] of optional) {
  if (document.querySelector(selector)) {
    import(module).then((m) => m.init && m.init()).catch((err) => console.warn("module", module, err));
  }
}
