// trainctl dashboard: the job list (/), a job page (/jobs/ID) and several
// jobs' charts overlaid (/compare?jobs=ID,ID), all polling the
// coordinator's JSON API. Every piece of data is put in the page
// with textContent or attributes, never as HTML, because job names, reasons
// and log lines are whatever users and their programs wrote.
"use strict";

const POLL_MS = 1000;
const LIST_POLL_MS = 2000;
const MAX_LOG_LINES = 500;
const EVENTS_PAGE = 2000;  // the server's cap per response

// el("td", {className: "num", text: "3"}, child...)
function el(tag, props, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (k === "text") e.textContent = v;
    else if (k === "dataset") Object.assign(e.dataset, v);
    else e[k] = v;
  }
  for (const c of children) e.append(c);
  return e;
}

// ---- the token (a coordinator with authentication) ----
// It arrives in the URL's fragment (#token=..., which browsers never send to
// a server) or through the prompt below, is kept in sessionStorage (this tab
// only, gone when it closes) and goes to the API as an Authorization header.
const TOKEN_KEY = "trainctl-token";

function takeTokenFromFragment() {
  const params = new URLSearchParams(location.hash.slice(1));
  const t = params.get("token");
  if (!t) return;
  sessionStorage.setItem(TOKEN_KEY, t);
  // Out of the address bar and the history, where it could be seen or copied.
  params.delete("token");
  const rest = params.toString();
  history.replaceState(null, "", location.pathname + location.search + (rest ? `#${rest}` : ""));
}

function storedToken() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

// Asks for a token after a 401 (`reason` is the server's); the views keep
// polling and use the token from their next request on.
function showTokenPrompt(reason) {
  document.body.dataset.auth = "needed";
  let form = document.getElementById("token-prompt");
  if (!form) {
    const input = el("input", { type: "password", id: "token-input", autocomplete: "off", required: true });
    form = el("form", { id: "token-prompt", className: "token-prompt" },
      el("label", { htmlFor: "token-input", text: "Token" }), input,
      el("button", { type: "submit", text: "Use token" }),
      el("span", { id: "token-reason", className: "muted" }));
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      form.remove();
    });
    document.querySelector("header").after(form);
  }
  document.getElementById("token-reason").textContent = reason;
}

class HttpError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

async function getJson(url) {
  const headers = {};
  const t = storedToken();
  if (t) headers.Authorization = `Bearer ${t}`;
  const r = await fetch(url, { cache: "no-store", headers });
  if (!r.ok) {
    let msg = `HTTP ${r.status}`;
    try { msg = (await r.json()).error || msg; } catch (_) { /* not JSON */ }
    throw new HttpError(r.status, msg);
  }
  document.body.dataset.auth = "ok";
  return r.json();
}

// What a failed refresh shows: a token prompt for a 401, the reason else.
function showFailure(e) {
  if (e.status === 401) {
    showTokenPrompt(e.message);
    setConn(false, "a token is needed");
  } else {
    setConn(false, e.message);
  }
}

function setConn(ok, why) {
  const c = document.getElementById("conn");
  c.textContent = ok ? `updated ${new Date().toLocaleTimeString()}` : `no data: ${why}`;
  c.classList.toggle("down", !ok);
}

// "JOB_STATE_RUNNING" -> "running"
function stateName(s) { return String(s || "").replace(/^(JOB|RANK)_STATE_/, "").toLowerCase(); }
const FINAL = new Set(["succeeded", "failed", "cancelled"]);
function num(v) { return v === undefined || v === null ? NaN : Number(v); }
function fmt(v) { return Number.isFinite(v) ? formatNumber(v) : "–"; }
function stateCell(s) { return el("span", { className: `state state-${stateName(s)}`, text: stateName(s) }); }
function timeText(ms) { const n = num(ms); return n > 0 ? new Date(n).toLocaleString() : "–"; }
// An age from now: "4 s ago" (a clock a little ahead of the browser's reads "just now").
function agoText(ms) {
  const n = num(ms);
  if (!(n > 0)) return "–";
  const s = (Date.now() - n) / 1000;
  if (s < 1) return "just now";
  if (s < 90) return `${Math.round(s)} s ago`;
  if (s < 5400) return `${Math.round(s / 60)} min ago`;
  return `${(s / 3600).toFixed(1)} h ago`;
}
// What a job waits for, or why it is in its state (a long one is cut; the
// whole text is its tooltip).
function reasonCell(j) {
  const text = j.pending_reason || j.reason || "";
  return el("td", { className: "reason", text, title: text });
}
// An estimated start, from now: "in 12 min".
function untilText(ms) {
  const n = num(ms);
  if (!(n > 0)) return "–";
  const s = (n - Date.now()) / 1000;
  if (s <= 0) return "now";
  if (s < 90) return `in ${Math.round(s)} s`;
  if (s < 5400) return `in ${Math.round(s / 60)} min`;
  return `in ${(s / 3600).toFixed(1)} h`;
}

// Log scale and smoothing for every chart of a page, kept for the tab.
function chartOptions(onChange) {
  const saved = JSON.parse(sessionStorage.getItem("trainctl-chart") || "{}");
  const opts = { log: !!saved.log, smooth: Number(saved.smooth) || 0 };
  const log = el("input", { type: "checkbox", id: "opt-log", checked: opts.log });
  const smoothing = el("input", { type: "range", id: "opt-smooth", min: 0, max: 0.99, step: 0.01, value: opts.smooth });
  const shown = el("span", { text: opts.smooth.toFixed(2) });
  const changed = () => {
    opts.log = log.checked;
    opts.smooth = Number(smoothing.value);
    shown.textContent = opts.smooth.toFixed(2);
    sessionStorage.setItem("trainctl-chart", JSON.stringify(opts));
    onChange();
  };
  log.addEventListener("change", changed);
  smoothing.addEventListener("input", changed);
  const controls = el("div", { className: "chart-options" },
    el("label", {}, log, " log scale"),
    el("label", {}, "smoothing ", smoothing, " ", shown));
  return { opts, controls };
}

// Every event of a job from `from`, page by page; calls apply on each.
async function readEvents(id, from, apply) {
  let next = from, closed = false;
  for (;;) {
    const r = await getJson(`/api/jobs/${encodeURIComponent(id)}/events?from_seq=${next}&limit=${EVENTS_PAGE}`);
    r.events.forEach(apply);
    next = r.next_seq;
    closed = r.closed;
    if (r.closed || r.events.length < EVENTS_PAGE) break;
  }
  return { next, closed };
}

// ---- job list ----

function listView(app) {
  const jobsBody = el("tbody");
  const queueBody = el("tbody");
  const usersBody = el("tbody");
  const policy = el("p", { className: "muted", id: "policy" });
  const workersBody = el("tbody");
  const head = (...cols) => el("thead", {}, el("tr", {}, ...cols.map(([t, c]) => el("th", { text: t, className: c || "" }))));
  const selected = new Set();
  const compare = el("a", { id: "compare", className: "button", text: "Compare selected jobs" });
  const updateCompare = () => {
    compare.hidden = selected.size < 2;
    compare.href = `/compare?jobs=${[...selected].map(encodeURIComponent).join(",")}`;
  };
  updateCompare();
  app.replaceChildren(
    el("h1", { text: "Jobs" }), compare,
    el("table", { id: "jobs" }, head([""], ["Job"], ["Name"], ["Owner"], ["State"], ["Step", "num"], ["Loss", "num"], ["Samples/s", "num"], ["Restarts", "num"], ["Submitted"], ["Reason"]), jobsBody),
    el("h2", { text: "Queue" }), policy,
    el("table", { id: "queue" }, head(["#", "num"], ["Job"], ["Name"], ["Owner"], ["Priority"], ["Ranks", "num"], ["Usage (slot-h)", "num"], ["Starts"], ["Waiting for"]), queueBody),
    el("table", { id: "users" }, head(["User"], ["Slots in use", "num"], ["Slot quota", "num"], ["GPU quota", "num"], ["Usage (slot-h)", "num"], ["Max class"], ["Group"]), usersBody),
    el("h2", { text: "Workers" }),
    el("table", { id: "workers" }, head(["Worker"], ["Host"], ["Slots free", "num"], ["Last heartbeat"], ["Running"]), workersBody));

  async function refresh() {
    try {
      const { jobs } = await getJson("/api/jobs");
      jobsBody.replaceChildren(...[...jobs].reverse().map((j) => {
        const v = (j.latest_train && j.latest_train.values) || {};
        const total = num(j.total_steps);
        const step = num(j.latest_train && j.latest_train.step);
        const pick = el("input", { type: "checkbox", checked: selected.has(j.id), title: "compare" });
        pick.addEventListener("change", () => {
          if (pick.checked) selected.add(j.id); else selected.delete(j.id);
          updateCompare();
        });
        return el("tr", { dataset: { job: j.id } },
          el("td", {}, pick),
          el("td", {}, el("a", { href: `/jobs/${encodeURIComponent(j.id)}`, text: j.id })),
          el("td", { text: (j.spec && j.spec.name) || "" }),
          el("td", { text: j.owner || "–" }),
          el("td", {}, stateCell(j.state)),
          el("td", { className: "num", text: total > 0 ? `${step} / ${total}` : "–" }),
          el("td", { className: "num", text: fmt(num(v.loss)) }),
          el("td", { className: "num", text: fmt(num(v.samples_per_sec)) }),
          el("td", { className: "num", text: String(j.restarts || 0) }),
          el("td", { text: timeText(j.created_unix_ms) }),
          reasonCell(j));
      }));
      document.body.dataset.jobs = String(jobs.length);
      // In the order the scheduler considers them (docs/scheduling.md).
      const q = await getJson("/api/queue");
      const classes = (q.classes || []).map((c) => `${c.name} ${c.value || 0}${c.is_default ? " (default)" : ""}`);
      policy.textContent = `policy: ${q.policy_origin || ""}; classes ${classes.join(", ")}; ` +
        `fair-share half-life ${q.half_life_hours} h; backfill ${q.backfill ? "on" : "off"}, ` +
        `preemption ${q.preemption ? "on" : "off"}`;
      const waiting = q.jobs || [];
      queueBody.replaceChildren(...(waiting.length === 0
        ? [el("tr", {}, el("td", { colSpan: 9, className: "muted", text: "no job is waiting" }))]
        : waiting.map((e) => {
          const st = stateName(e.state);
          return el("tr", { dataset: { queuedJob: e.job_id } },
            el("td", { className: "num", text: String(e.position || 0) }),
            el("td", {}, el("a", { href: `/jobs/${encodeURIComponent(e.job_id)}`, text: e.job_id }),
              st === "queued" ? "" : el("span", { className: `state state-${st}`, text: ` (${st})` })),
            el("td", { text: e.name || "–" }),
            el("td", { text: e.owner || "–" }),
            el("td", { text: `${e.priority_class} ${e.priority || 0}` }),
            el("td", { className: "num", text: String(e.ranks || 0) }),
            el("td", { className: "num", text: fmt(num(e.owner_usage_slot_hours)) }),
            el("td", { text: untilText(e.estimated_start_unix_ms) }),
            el("td", { text: e.reason || "" }));
        })));
      document.body.dataset.queued = String(waiting.length);
      // Each user's standing against their quota (-1: no limit).
      const quota = (v) => (num(v) < 0 ? "–" : String(num(v) || 0));
      usersBody.replaceChildren(...(q.users || []).map((u) => el("tr", { dataset: { user: u.user } },
        el("td", { text: u.user === "*" ? "* (everyone else)" : u.user }),
        el("td", { className: "num", text: String(u.slots_in_use || 0) }),
        el("td", { className: "num", text: quota(u.slot_quota) + (u.borrow ? " (borrows)" : "") }),
        el("td", { className: "num", text: quota(u.gpu_quota) }),
        el("td", { className: "num", text: fmt(num(u.usage_slot_hours)) }),
        el("td", { text: u.max_class || "–" }),
        el("td", { text: u.group || "–" }))));
      const { workers } = await getJson("/api/workers");
      workersBody.replaceChildren(...workers.map((w) => el("tr", {},
        el("td", { text: w.name }), el("td", { text: w.host }),
        el("td", { className: "num", text: `${w.slots_free} / ${w.slots_total}` }),
        el("td", { text: agoText(w.last_heartbeat_unix_ms), title: timeText(w.last_heartbeat_unix_ms) }),
        el("td", { text: (w.ranks || []).map((r) => `${r.job_id}/${r.rank}`).join(", ") }))));
      setConn(true);
    } catch (e) {
      showFailure(e);
    }
    setTimeout(refresh, LIST_POLL_MS);
  }
  refresh();
}

// ---- one job ----

function jobView(app, id) {
  const charts = {
    loss: el("div", { className: "chart", id: "chart-loss" }),
    accuracy: el("div", { className: "chart", id: "chart-accuracy" }),
    throughput: el("div", { className: "chart", id: "chart-throughput" }),
    lr: el("div", { className: "chart", id: "chart-lr" }),
  };
  const chart = chartOptions(() => renderEvents());
  const facts = el("div", { className: "facts" });
  const reason = el("p", { className: "reason muted" });
  const bar = el("div");
  const ranksBody = el("tbody");
  const transitions = el("ol");
  const logs = el("pre", { className: "logs", id: "logs" });
  const title = el("h1", { text: id });
  app.replaceChildren(
    el("p", {}, el("a", { href: "/", text: "← all jobs" })), title, facts,
    el("div", { className: "progress" }, bar), reason,
    chart.controls,
    el("div", { className: "charts" }, charts.loss, charts.accuracy, charts.throughput, charts.lr),
    el("h2", { text: "Ranks" }),
    el("table", { id: "ranks" }, el("thead", {}, el("tr", {}, ...["Rank", "Worker", "Host", "State", "PID", "Exit", "Message"].map((t) => el("th", { text: t })))), ranksBody),
    el("h2", { text: "State changes" }), transitions,
    el("h2", { text: "Recent log lines" }), logs);

  const s = {
    nextSeq: 1, closed: false, final: false,
    loss: new Series(), accuracy: new Series(), evalLoss: new Series(), throughput: new Series(), lr: new Series(),
    logLines: [],
  };

  function renderJob(j) {
    const name = (j.spec && j.spec.name) || "";
    title.textContent = name ? `${name} (${j.id})` : j.id;
    document.title = `${title.textContent} · trainctl`;
    const total = num(j.total_steps);
    const step = num(j.latest_train && j.latest_train.step);
    const v = (j.latest_train && j.latest_train.values) || {};
    const fact = (k, val) => el("div", { className: "fact" }, el("div", { className: "k", text: k }), el("div", { className: "v" }, val));
    facts.replaceChildren(
      fact("State", stateCell(j.state)),
      fact("Step", total > 0 ? `${Number.isFinite(step) ? step : 0} / ${total}` : "–"),
      fact("Epoch", String(num(j.latest_train && j.latest_train.epoch) || 0)),
      fact("Loss", fmt(num(v.loss))),
      fact("Samples/s", fmt(num(v.samples_per_sec))),
      fact("Generation", String(j.generation || 0)),
      fact("Restarts", String(j.restarts || 0)),
      fact("Preempted", String(j.preemptions || 0)),
      fact("Stragglers", (j.stragglers || []).map((s) =>
        `rank ${s.rank || 0} on ${s.worker}: ${fmt(num(s.ratio))}× ${s.phase}`).join("; ") || "none"),
      fact("Priority", (j.spec && j.spec.priority) || "–"),
      fact("World size", String(j.world_size || 0)));
    bar.style.width = total > 0 && step > 0 ? `${Math.min(100, (100 * step) / total)}%` : "0%";
    reason.textContent = j.pending_reason || j.reason || "";
    ranksBody.replaceChildren(...(j.ranks || []).map((r) => el("tr", {},
      el("td", { text: String(r.rank || 0) }), el("td", { text: r.worker || "" }),
      el("td", { text: r.host || "" }), el("td", { text: stateName(r.state) }),
      el("td", { text: r.pid ? String(r.pid) : "" }),
      el("td", { text: stateName(r.state) === "exited" ? String(r.exit_code || 0) : "" }),
      el("td", { text: r.message || "" }))));
    transitions.replaceChildren(...(j.transitions || []).map((t) => el("li", {
      // The first transition (submission) has no "from" state.
      text: `${timeText(t.time_unix_ms)}: ${stateName(t.from) === "unspecified" ? "" : `${stateName(t.from)} → `}${stateName(t.to)}${t.reason ? ` (${t.reason})` : ""}`,
    })));
    s.final = FINAL.has(stateName(j.state));
    document.body.dataset.state = stateName(j.state);
  }

  function apply(ev) {
    if (ev.metric) {
      const m = ev.metric, v = m.values || {}, step = num(m.step);
      if (m.kind === "train") {
        s.loss.add(step, num(v.loss));
        s.throughput.add(step, num(v.samples_per_sec));
        s.lr.add(step, num(v.lr));
      } else if (m.kind === "eval") {
        s.accuracy.add(step, num(v.eval_accuracy));
        s.evalLoss.add(step, num(v.eval_loss));
      }
    } else if (ev.log) {
      s.logLines.push(ev.log);
      if (s.logLines.length > MAX_LOG_LINES) s.logLines.splice(0, s.logLines.length - MAX_LOG_LINES);
    }
  }

  function renderEvents() {
    const o = chart.opts;
    drawChart(charts.loss, "Training loss", s.loss, o);
    // Jobs without an accuracy (language models) chart their eval loss.
    if (s.accuracy.byStep.size === 0 && s.evalLoss.byStep.size > 0) {
      drawChart(charts.accuracy, "Eval loss", s.evalLoss, o);
    } else {
      drawChart(charts.accuracy, "Eval accuracy", s.accuracy, o);
    }
    drawChart(charts.throughput, "Throughput (samples/s)", s.throughput, o);
    drawChart(charts.lr, "Learning rate", s.lr, o);
    const atBottom = logs.scrollTop + logs.clientHeight >= logs.scrollHeight - 4;
    logs.replaceChildren(...s.logLines.map((l) => el("span", {
      className: l.stream === "stderr" ? "stderr" : "",
      text: `[rank ${l.rank || 0}] ${l.text}\n`,
    })));
    if (atBottom) logs.scrollTop = logs.scrollHeight;
    document.body.dataset.nextSeq = String(s.nextSeq);
    document.body.dataset.eventsClosed = String(s.closed);
  }

  async function tick() {
    try {
      renderJob(await getJson(`/api/jobs/${encodeURIComponent(id)}`));
      // Page through everything new, then draw once.
      const r = await readEvents(id, s.nextSeq, apply);
      s.nextSeq = r.next;
      s.closed = r.closed;
      renderEvents();
      setConn(true);
    } catch (e) {
      showFailure(e);
    }
    // A finished job whose history has all arrived changes no more.
    if (!(s.final && s.closed)) setTimeout(tick, POLL_MS);
  }
  tick();
}

// ---- several jobs overlaid (/compare?jobs=job-1,job-2) ----

function compareView(app, ids) {
  const metrics = [
    ["loss", "Training loss", "train", "loss"],
    ["eval_accuracy", "Eval accuracy", "eval", "eval_accuracy"],
    ["eval_loss", "Eval loss", "eval", "eval_loss"],
    ["throughput", "Throughput (samples/s)", "train", "samples_per_sec"],
    ["lr", "Learning rate", "train", "lr"],
  ];
  const charts = Object.fromEntries(metrics.map(([key]) => [key, el("div", { className: "chart", id: `chart-${key}` })]));
  const jobs = ids.map((id) => ({ id, label: id, nextSeq: 1, done: false,
    series: Object.fromEntries(metrics.map(([key]) => [key, new Series()])) }));
  const chart = chartOptions(() => draw());
  const names = el("p", { className: "muted" });
  app.replaceChildren(
    el("p", {}, el("a", { href: "/", text: "← all jobs" })),
    el("h1", { text: `Compare ${ids.join(", ")}` }), names, chart.controls,
    el("div", { className: "charts" }, ...metrics.map(([key]) => charts[key])));

  function draw() {
    for (const [key, title] of metrics) {
      drawChart(charts[key], title, jobs.map((j) => ({ label: j.label, series: j.series[key] })), chart.opts);
    }
    document.body.dataset.compared = String(jobs.length);
  }

  async function tick() {
    try {
      for (const j of jobs) {
        if (j.done) continue;
        const job = await getJson(`/api/jobs/${encodeURIComponent(j.id)}`);
        j.label = job.spec && job.spec.name ? `${j.id} ${job.spec.name}` : j.id;
        const r = await readEvents(j.id, j.nextSeq, (ev) => {
          if (!ev.metric) return;
          const m = ev.metric, v = m.values || {}, step = num(m.step);
          for (const [key, , kind, value] of metrics) {
            if (m.kind === kind) j.series[key].add(step, num(v[value]));
          }
        });
        j.nextSeq = r.next;
        j.done = r.closed && FINAL.has(stateName(job.state));
      }
      names.textContent = jobs.map((j) => j.label).join(" · ");
      draw();
      setConn(true);
    } catch (e) {
      showFailure(e);
    }
    if (jobs.some((j) => !j.done)) setTimeout(tick, POLL_MS);
  }
  tick();
}

takeTokenFromFragment();
const m = location.pathname.match(/^\/jobs\/([^/]+)$/);
const app = document.getElementById("app");
const compared = location.pathname === "/compare"
  ? (new URLSearchParams(location.search).get("jobs") || "").split(",").filter((id) => id) : [];
if (m) jobView(app, decodeURIComponent(m[1]));
else if (compared.length > 0) compareView(app, compared.slice(0, 8));
else listView(app);
