// Line charts drawn as inline SVG, without any library. Text goes in with
// textContent only, so nothing in the data is ever parsed as markup.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
// Colour-blind-friendly (Okabe-Ito), the CLI's plot colours: job i has
// colour i in every chart.
const COLORS = ["#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#F0E442", "#000000"];

function svgEl(name, attrs) {
  const el = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  return el;
}

// 0.000123 -> "1.23e-4", 1234567 -> "1.23e+6", 0.5 -> "0.5".
function formatNumber(v) {
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return v.toExponential(2);
  return String(Number(v.toPrecision(4)));
}

// A series keyed by step: a step reported again (a restarted generation
// replays the steps after its checkpoint) replaces the older point, so the
// line stays a function of the step.
class Series {
  constructor() { this.byStep = new Map(); }
  add(step, value) {
    if (Number.isFinite(step) && Number.isFinite(value)) this.byStep.set(step, value);
  }
  points() {
    return [...this.byStep.entries()].sort((a, b) => a[0] - b[0]);
  }
}

// TensorBoard's smoothing: a debiased exponential moving average.
function smooth(pts, weight) {
  if (!(weight > 0)) return pts;
  let avg = 0, debias = 1;
  return pts.map(([x, y]) => {
    avg = avg * weight + (1 - weight) * y;
    debias *= weight;
    return [x, avg / (1 - debias)];
  });
}

// Draws `lines` ([{label, series}], line i in COLORS[i]) into `container`,
// replacing what was there, with its own y axis; `opts.log` a log10 axis
// (values <= 0 left out), `opts.smooth` a smoothing weight (the raw line
// stays, faint). Records what it drew in data-points / data-last-step /
// data-last-value (of the first line), which tests and scripts read.
function drawChart(container, title, lines, opts) {
  opts = opts || {};
  if (lines instanceof Series) lines = [{ label: "", series: lines }];
  const all = lines.map((l) => l.series.points().filter(([, y]) => !opts.log || y > 0));
  const first = all[0] || [];
  container.replaceChildren();
  const h = document.createElement("h3");
  h.textContent = opts.log ? `${title} (log)` : title;
  container.appendChild(h);
  container.dataset.points = String(first.length);
  container.dataset.lastStep = first.length ? String(first[first.length - 1][0]) : "";
  container.dataset.lastValue = first.length ? String(first[first.length - 1][1]) : "";

  const W = 560, H = 200, L = 56, R = 12, T = 10, B = 28;
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, role: "img" });
  const label = svgEl("title");
  label.textContent = `${title}: ${first.length} points`;
  svg.appendChild(label);
  svg.appendChild(svgEl("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  svg.appendChild(svgEl("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  const pts = all.flat();
  if (pts.length === 0) {
    const t = svgEl("text", { class: "label", x: W / 2, y: H / 2, "text-anchor": "middle" });
    t.textContent = "no data yet";
    svg.appendChild(t);
    container.appendChild(svg);
    return;
  }
  const f = opts.log ? Math.log10 : (v) => v;
  let x0 = Math.min(...pts.map((p) => p[0])), x1 = Math.max(...pts.map((p) => p[0]));
  let y0 = Math.min(...pts.map((p) => f(p[1]))), y1 = Math.max(...pts.map((p) => f(p[1])));
  // A lone point sits inside the frame, not on its edge.
  if (x1 === x0) { x0 -= 1; x1 += 1; }
  if (y1 === y0) { const d = Math.abs(y0) * 0.05 || 1; y0 -= d; y1 += d; }
  const pad = (y1 - y0) * 0.05;
  y0 -= pad; y1 += pad;
  const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const sy = (y) => H - B - ((f(y) - y0) / (y1 - y0)) * (H - T - B);

  for (const y of [y0, (y0 + y1) / 2, y1]) {
    const t = svgEl("text", { class: "label", x: L - 6, y: H - B - ((y - y0) / (y1 - y0)) * (H - T - B) + 4, "text-anchor": "end" });
    t.textContent = formatNumber(opts.log ? 10 ** y : y);
    svg.appendChild(t);
  }
  // One label under a single step, not the same one twice.
  const steps = [...new Set(pts.map((p) => p[0]))].sort((a, b) => a - b);
  const xLabels = steps.length === 1 ? [[steps[0], "middle"]]
    : [[steps[0], "start"], [steps[steps.length - 1], "end"]];
  for (const [x, anchor] of xLabels) {
    const t = svgEl("text", { class: "label", x: sx(x), y: H - 8, "text-anchor": anchor });
    t.textContent = `step ${x}`;
    svg.appendChild(t);
  }
  all.forEach((line, i) => {
    if (line.length === 0) return;
    const color = COLORS[i % COLORS.length];
    const coords = (p) => p.map(([x, y]) => `${sx(x).toFixed(1)},${sy(y).toFixed(1)}`).join(" ");
    if (opts.smooth > 0) {
      svg.appendChild(svgEl("polyline", { class: "series raw", points: coords(line), stroke: color, "stroke-opacity": 0.3 }));
    }
    svg.appendChild(svgEl("polyline", { class: "series", points: coords(smooth(line, opts.smooth)), stroke: color, "data-line": lines[i].label }));
    // Dots only while there are few enough to tell apart.
    if (line.length <= 60) {
      for (const [x, y] of line) svg.appendChild(svgEl("circle", { class: "dot", cx: sx(x), cy: sy(y), r: 2.5, fill: color }));
    }
  });
  container.appendChild(svg);
  if (lines.length > 1) {
    const legend = document.createElement("div");
    legend.className = "legend";
    lines.forEach((l, i) => {
      const item = document.createElement("span");
      item.style.borderColor = COLORS[i % COLORS.length];
      item.textContent = l.label;
      legend.appendChild(item);
    });
    container.appendChild(legend);
  }
}
