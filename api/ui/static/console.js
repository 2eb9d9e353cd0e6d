// The console's script: SVG line and bar charts, and the overview's live figures.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const W = 600, H = 160, PAD = 40;

function el(name, attrs, parent) {
  const node = document.createElementNS(SVG, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (parent) parent.appendChild(node);
  return node;
}

function text(parent, x, y, value, anchor) {
  const t = el("text", { x: x, y: y, "text-anchor": anchor || "start" }, parent);
  t.textContent = value;
  return t;
}

function legend(svg, k, count, name) {
  const x = W - 8 - 80 * (count - k);
  el("rect", { x: x, y: H - 13, width: 10, height: 8, class: `key s${k}` }, svg);
  text(svg, x + 14, H - 5, name);
}

function axes(svg, top) {
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  el("line", { x1: PAD, y1: H - PAD, x2: W - 4, y2: H - PAD, class: "axis" }, svg);
  el("line", { x1: PAD, y1: 6, x2: PAD, y2: H - PAD, class: "axis" }, svg);
  text(svg, PAD - 3, 12, top.toPrecision(3), "end");
  text(svg, PAD - 3, H - PAD, "0", "end");
}

// series: [{name, values: [number|null]}]; the x axis is the sample index.
function lineChart(svg, series) {
  const all = series.flatMap((s) => s.values.filter((v) => v !== null));
  const top = Math.max(1e-9, ...all) * 1.1;
  axes(svg, top);
  const n = Math.max(2, ...series.map((s) => s.values.length));
  const x = (i) => PAD + (i * (W - PAD - 8)) / (n - 1);
  const y = (v) => H - PAD - (v / top) * (H - PAD - 8);
  series.forEach((s, k) => {
    const points = s.values.map((v, i) => (v === null ? null : `${x(i)},${y(v)}`)).filter(Boolean);
    if (points.length) el("polyline", { points: points.join(" "), class: `s${k}` }, svg);
    legend(svg, k, series.length, s.name);
  });
}

// bars: [{label, values: [number]}], one colour per value index; names label the colours.
function barChart(svg, bars, names) {
  const top = Math.max(1, ...bars.flatMap((b) => b.values)) * 1.1;
  axes(svg, top);
  const slot = (W - PAD - 8) / Math.max(1, bars.length);
  const width = (slot * 0.8) / Math.max(1, names.length);
  bars.forEach((b, i) => {
    b.values.forEach((v, k) => {
      const h = (v / top) * (H - PAD - 8);
      el("rect", { x: PAD + i * slot + k * width + 4, y: H - PAD - h, width: width, height: h, class: `bar s${k}` }, svg);
    });
    text(svg, PAD + i * slot + 4, H - PAD + 12, b.label);
  });
  names.forEach((name, k) => legend(svg, k, names.length, name));
}

function island(id) {
  const node = document.getElementById(id);
  return node ? JSON.parse(node.textContent) : null;
}

function ms(v) { return v === null ? "-" : `${(v * 1000).toFixed(1)} ms`; }

function groupBars(groups) {
  return groups.map((g) => ({ label: g.policy, values: [g.idle, g.busy, g.starting] }));
}

function setText(id, value) {
  document.getElementById(id).textContent = value;
}

const FAILURES = ["user", "infra", "refused"];

// The API's calls by class (as sandbox_calls_total counts them) and the runs' model usage.
function showCalls(calls, model) {
  setText("calls_count", String(calls.count));
  for (const kind of ["ok", ...FAILURES]) {
    const share = calls.share[kind];
    const n = calls.by_class[kind];
    setText(`calls_${kind}`, share === null ? String(n) : `${n} (${(100 * share).toFixed(1)}%)`);
  }
  setText("calls_p50_s", ms(calls.p50_s));
  setText("calls_p99_s", ms(calls.p99_s));
  if (model === null) return; // runs are the operator's: shown to admin keys only
  setText("model_prompt_tokens", model.prompt_tokens.toFixed(0));
  setText("model_completion_tokens", model.completion_tokens.toFixed(0));
  setText("model_calls", model.calls.toFixed(0));
  setText("model_cost", model.cost.toFixed(4));
}

function liveOverview(tiles) {
  const history = { rate: [], p50: [], p99: [], user: [], infra: [], refused: [] };
  const keep = 60;
  function show(data) {
    setText("executions_per_s", data.executions_per_s.toFixed(2));
    setText("p50_s", ms(data.p50_s));
    setText("p99_s", ms(data.p99_s));
    for (const key of ["infra_errors", "queue_depth", "executions_recorded"]) {
      setText(key, String(data[key]));
    }
    showCalls(data.calls, data.model);
    history.rate.push(data.executions_per_s);
    history.p50.push(data.p50_s === null ? null : data.p50_s * 1000);
    history.p99.push(data.p99_s === null ? null : data.p99_s * 1000);
    for (const kind of FAILURES) {
      const share = data.calls.share[kind];
      history[kind].push(share === null ? null : 100 * share);
    }
    for (const values of Object.values(history)) if (values.length > keep) values.shift();
    lineChart(document.getElementById("chart-rate"), [{ name: "exec/s", values: history.rate }]);
    lineChart(document.getElementById("chart-latency"), [
      { name: "p50", values: history.p50 },
      { name: "p99", values: history.p99 },
    ]);
    lineChart(
      document.getElementById("chart-calls"),
      FAILURES.map((kind) => ({ name: kind, values: history[kind] })),
    );
    const body = document.getElementById("groups");
    body.replaceChildren(...data.groups.map((g) => {
      const row = document.createElement("tr");
      for (const v of [g.policy, g.image, g.idle, g.busy, g.starting]) {
        const cell = document.createElement("td");
        cell.textContent = String(v);
        row.appendChild(cell);
      }
      return row;
    }));
    barChart(document.getElementById("chart-groups"), groupBars(data.groups), ["idle", "busy", "starting"]);
  }
  show(island("overview-data"));
  const url = tiles.dataset.live;
  setInterval(async () => {
    try {
      const response = await fetch(url, { credentials: "same-origin" });
      if (response.ok) show(await response.json());
    } catch (err) {
      // the service restarting: try again on the next tick
    }
  }, 2000);
}

function tenantsChart() {
  const usage = island("tenants-data");
  const bars = usage.map((u) => ({
    label: u.tenant,
    values: [u.held, u.max_concurrency === null ? 0 : u.max_concurrency],
  }));
  barChart(document.getElementById("chart-quotas"), bars, ["held", "quota"]);
}

function bars() {
  for (const node of document.querySelectorAll("svg[data-bars]")) {
    const data = island(node.dataset.bars);
    barChart(node, data.bars, data.names);
  }
}

function curves() {
  for (const node of document.querySelectorAll("svg[data-curve]")) {
    lineChart(node, island(node.dataset.curve));
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const tiles = document.querySelector("[data-live]");
  if (tiles) liveOverview(tiles);
  if (document.getElementById("tenants-data")) tenantsChart();
  curves();
  bars();
});
