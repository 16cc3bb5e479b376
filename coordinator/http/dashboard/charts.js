// Line charts drawn as inline SVG, without any library. Text goes in with
// textContent only, so nothing in the data is ever parsed as markup.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";

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

// Draws `series` into `container` (replacing what was there) and records
// what it drew in data-points / data-last-step / data-last-value, which
// tests and scripts can read from the DOM.
function drawChart(container, title, series) {
  const pts = series.points();
  container.replaceChildren();
  const h = document.createElement("h3");
  h.textContent = title;
  container.appendChild(h);
  container.dataset.points = String(pts.length);
  container.dataset.lastStep = pts.length ? String(pts[pts.length - 1][0]) : "";
  container.dataset.lastValue = pts.length ? String(pts[pts.length - 1][1]) : "";

  const W = 560, H = 200, L = 56, R = 12, T = 10, B = 28;
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, role: "img" });
  const label = svgEl("title");
  label.textContent = `${title}: ${pts.length} points`;
  svg.appendChild(label);
  svg.appendChild(svgEl("line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  svg.appendChild(svgEl("line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  if (pts.length === 0) {
    const t = svgEl("text", { class: "label", x: W / 2, y: H / 2, "text-anchor": "middle" });
    t.textContent = "no data yet";
    svg.appendChild(t);
    container.appendChild(svg);
    return;
  }
  let x0 = pts[0][0], x1 = pts[pts.length - 1][0];
  let y0 = Math.min(...pts.map((p) => p[1])), y1 = Math.max(...pts.map((p) => p[1]));
  if (x1 === x0) { x0 -= 1; x1 += 1; }
  if (y1 === y0) { const d = Math.abs(y0) * 0.05 || 1; y0 -= d; y1 += d; }
  const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
  const sy = (y) => H - B - ((y - y0) / (y1 - y0)) * (H - T - B);

  for (const y of [y0, (y0 + y1) / 2, y1]) {
    const t = svgEl("text", { class: "label", x: L - 6, y: sy(y) + 4, "text-anchor": "end" });
    t.textContent = formatNumber(y);
    svg.appendChild(t);
  }
  // One point (one eval so far): one label under it, not the same one twice.
  const xLabels = pts.length === 1 ? [[pts[0][0], "middle"]]
    : [[pts[0][0], "start"], [pts[pts.length - 1][0], "end"]];
  for (const [x, anchor] of xLabels) {
    const t = svgEl("text", { class: "label", x: sx(x), y: H - 8, "text-anchor": anchor });
    t.textContent = `step ${x}`;
    svg.appendChild(t);
  }
  const coords = pts.map(([x, y]) => `${sx(x).toFixed(1)},${sy(y).toFixed(1)}`);
  svg.appendChild(svgEl("polyline", { class: "series", points: coords.join(" ") }));
  // Dots only while there are few enough to tell apart.
  if (pts.length <= 60) {
    for (const [x, y] of pts) svg.appendChild(svgEl("circle", { class: "dot", cx: sx(x), cy: sy(y), r: 2.5 }));
  }
  container.appendChild(svg);
}
