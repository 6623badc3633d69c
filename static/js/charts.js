// Metrics charts (uPlot, vendored). A `[data-metrics]` holder names ONE Prometheus query (the default
// charts join theirs with "or", each series carrying a "chart" label) and its step and history; each
// `[data-chart]` figure inside draws the series routed to it. Live holders open the /metrics SSE stream
// (`initial`: a range answer, `point`: an instant answer per step, `query_error`); a static holder draws
// the range answer the server put in <script type="application/json" id="metrics-initial">.
// History is bounded (the holder's range, and MAX_POINTS per series); a closed stream reopens with backoff.

const PALETTE = ["#2563eb", "#dc2626", "#16a34a", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#4b5563"];
const MAX_POINTS = 1000;
const MAX_BACKOFF_MS = 30000;
let uplotReady = null;

function loadUplot(base) {
  if (window.uPlot) return Promise.resolve(window.uPlot);
  if (!uplotReady) {
    uplotReady = new Promise((resolve, reject) => {
      const script = document.createElement("script");
      script.src = `${base}/static/vendor/uplot/uPlot.iife.min.js`;
      script.onload = () => resolve(window.uPlot);
      script.onerror = () => reject(new Error("uPlot did not load"));
      document.head.append(script);
    });
  }
  return uplotReady;
}

function formatValue(unit, v) {
  if (v == null || Number.isNaN(v)) return "";
  if (unit === "bytes") {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return `${v.toFixed(i ? 1 : 0)} ${units[i]}`;
  }
  if (unit === "cores") return v.toFixed(Math.abs(v) < 1 ? 3 : 2);
  return Math.abs(v) >= 1000 || Number.isInteger(v) ? String(Math.round(v * 100) / 100) : v.toPrecision(4);
}

function seriesName(metric, by) {
  if (by && metric[by] != null) return metric[by];
  const labels = Object.entries(metric).filter(([k]) => k !== "__name__" && k !== "chart")
    .map(([k, v]) => `${k}="${v}"`).join(", ");
  return `${metric.__name__ || ""}{${labels}}`;
}

/** One figure: its series (name → Map(t → v)) and the uPlot drawing them. */
class Chart {
  constructor(figure) {
    this.figure = figure;
    this.unit = figure.dataset.unit || "";
    this.by = figure.dataset.by || "";
    this.status = figure.querySelector(".chart-status");
    this.series = new Map();
    this.plot = null;
    this.names = "";
  }

  add(metric, t, v) {
    const name = seriesName(metric, this.by);
    if (!this.series.has(name)) this.series.set(name, new Map());
    this.series.get(name).set(t, Number(v));
  }

  clear() { this.series.clear(); }

  trim(horizon) {
    for (const points of this.series.values()) {
      for (const t of points.keys()) if (t < horizon) points.delete(t);
      while (points.size > MAX_POINTS) points.delete(points.keys().next().value);
    }
    for (const [name, points] of this.series) if (!points.size) this.series.delete(name);
  }

  data() {
    const names = [...this.series.keys()].sort();
    const times = [...new Set(names.flatMap((n) => [...this.series.get(n).keys()]))].sort((a, b) => a - b);
    const columns = names.map((n) => times.map((t) => this.series.get(n).get(t) ?? null));
    return { names, times, columns };
  }

  draw(uPlot) {
    const { names, times, columns } = this.data();
    const count = columns.reduce((sum, col) => sum + col.filter((v) => v != null).length, 0);
    this.figure.dataset.points = String(count);
    this.figure.dataset.series = String(names.length);
    if (!names.length) {
      if (this.status && !this.status.textContent.trim()) this.status.textContent = "No series yet.";
      return;
    }
    if (this.status && this.status.dataset.kind !== "error") this.status.textContent = "";
    const data = [times, ...columns];
    const key = names.join("\u0000");
    if (this.plot && key === this.names) { this.plot.setData(data); return; }
    this.plot?.destroy();
    this.names = key;
    const unit = this.unit;
    const opts = {
      width: this.width(), height: 220,
      scales: { x: { time: true } },
      series: [{}, ...names.map((name, i) => ({
        label: name, stroke: PALETTE[i % PALETTE.length], width: 1.5, spanGaps: true,
        value: (_u, v) => formatValue(unit, v),
      }))],
      axes: [{ stroke: "currentColor", grid: { stroke: "rgba(128,128,128,.2)" } },
        { stroke: "currentColor", grid: { stroke: "rgba(128,128,128,.2)" }, size: 70,
          values: (_u, ticks) => ticks.map((v) => formatValue(unit, v)) }],
      legend: { live: true },
    };
    this.plot = new uPlot(opts, data, this.figure);
    this.figure.classList.add("drawn");   // the server's snapshot table gives way to the live chart
    this.plot.root.querySelector("canvas")?.setAttribute("aria-hidden", "true");
  }

  width() { return Math.max(260, Math.floor(this.figure.clientWidth - 24)); }

  resize() { this.plot?.setSize({ width: this.width(), height: 220 }); }

  note(text, kind) {
    if (!this.status) return;
    this.status.textContent = text;
    this.status.dataset.kind = kind || "";
  }
}

/** A holder: one query, its charts, its stream. */
class Holder {
  constructor(element, uPlot) {
    this.element = element;
    this.uPlot = uPlot;
    this.charts = new Map([...element.querySelectorAll("[data-chart]")].map((f) => [f.dataset.chart, new Chart(f)]));
    this.range = Number(element.dataset.range) || 600;
    this.backoff = 1000;
    this.source = null;
  }

  chartFor(metric) {
    return this.charts.get(metric.chart) || (this.charts.size === 1 ? [...this.charts.values()][0] : null);
  }

  /** A Prometheus answer: matrix (replaces the history) or vector (one more point per series). */
  take(answer) {
    const data = answer?.data;
    if (!data || !Array.isArray(data.result)) return;
    let latest = 0;
    if (data.resultType === "matrix") {
      for (const chart of this.charts.values()) chart.clear();
      for (const row of data.result) {
        const chart = this.chartFor(row.metric);
        for (const [t, v] of row.values || []) { chart?.add(row.metric, t, v); latest = Math.max(latest, t); }
      }
    } else if (data.resultType === "vector") {
      for (const row of data.result) {
        const [t, v] = row.value;
        this.chartFor(row.metric)?.add(row.metric, t, v);
        latest = Math.max(latest, t);
      }
    }
    for (const chart of this.charts.values()) {
      if (latest) chart.trim(latest - this.range);
      chart.draw(this.uPlot);
    }
  }

  note(text, kind) { for (const chart of this.charts.values()) chart.note(text, kind); }

  connect() {
    const url = new URL(this.element.dataset.metrics, location.href);
    url.searchParams.set("query", this.element.dataset.query);
    url.searchParams.set("step", this.element.dataset.step || "15");
    url.searchParams.set("range", String(this.range));
    const source = this.source = new EventSource(url, { withCredentials: true });
    const parse = (event) => { try { return JSON.parse(event.data); } catch { return null; } };
    source.addEventListener("initial", (event) => { this.backoff = 1000; this.note("", ""); this.take(parse(event)); });
    source.addEventListener("point", (event) => this.take(parse(event)));
    source.addEventListener("query_error", (event) => {
      const problem = parse(event);
      this.note(`Prometheus: ${problem?.error || "query failed"} (retrying every step)`, "error");
    });
    source.onerror = () => {
      if (source.readyState !== EventSource.CLOSED) return;   // the browser reconnects by itself
      this.note(`Metrics stream closed; reconnecting in ${Math.round(this.backoff / 1000)} s…`, "error");
      setTimeout(() => this.connect(), this.backoff);
      this.backoff = Math.min(this.backoff * 2, MAX_BACKOFF_MS);
    };
  }

  close() { this.source?.close(); }
}

export async function init() {
  const holders = [...document.querySelectorAll("[data-metrics]")];
  if (!holders.length) return;
  const base = document.querySelector("main")?.dataset.base || "";
  let uPlot;
  try {
    uPlot = await loadUplot(base);
  } catch (err) {
    console.warn("charts", err);
    return;
  }
  const initial = document.getElementById("metrics-initial");
  const live = [];
  for (const element of holders) {
    const holder = new Holder(element, uPlot);
    if (element.dataset.live === "true") {
      holder.connect();
      live.push(holder);
    } else if (initial) {
      try { holder.take(JSON.parse(initial.textContent)); } catch (err) { console.warn("charts", err); }
    }
    let pending = null;
    addEventListener("resize", () => {
      clearTimeout(pending);
      pending = setTimeout(() => { for (const chart of holder.charts.values()) chart.resize(); }, 150);
    });
  }
  addEventListener("pagehide", () => { for (const holder of live) holder.close(); });
}
