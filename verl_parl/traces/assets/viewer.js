"use strict";
// The swarm timeline viewer (verl_parl.traces.view): an episode list from the embedded index, and the
// Gantt chart of one episode, whose data (gzip + base64 in <script id="e<N>">) is decoded only when selected.
(function () {
  const index = JSON.parse(document.getElementById("index").textContent);
  const meta = JSON.parse(document.getElementById("meta").textContent);
  const $ = (id) => document.getElementById(id);
  const state = { sort: "id", desc: false, selected: null };
  const cache = new Map();

  function fmt(v, digits) {
    if (v === null || v === undefined) return "–";
    return typeof v === "number" && digits !== undefined ? v.toFixed(digits) : String(v);
  }

  async function load(id) {
    if (cache.has(id)) return cache.get(id);
    const b64 = $("e" + id).textContent.trim();
    const bytes = Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    const episode = JSON.parse(await new Response(stream).text());
    cache.set(id, episode);
    return episode;
  }

  function filtered() {
    const step = $("f-step").value, split = $("f-split").value;
    const minPar = parseFloat($("f-par").value), minCrit = parseFloat($("f-crit").value);
    const rows = index.filter((e) =>
      (step === "" || String(e.step) === step) &&
      (split === "all" || (split === "val") === e.validation) &&
      (isNaN(minPar) || (e.parallelism || 0) >= minPar) &&
      (isNaN(minCrit) || (e.critical_steps || 0) >= minCrit));
    const key = state.sort, sign = state.desc ? -1 : 1;
    rows.sort((a, b) => {
      const x = a[key], y = b[key];
      if (x === y) return a.id - b.id;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * sign;
    });
    return rows;
  }

  const COLUMNS = [["id", "#"], ["step", "step"], ["reward", "reward", 3], ["critical_steps", "crit. steps"],
    ["parallelism", "parallel.", 2], ["subagents", "subagents"], ["duration", "seconds", 2], ["node", "node"]];

  function renderList() {
    const rows = filtered();
    const head = "<tr>" + COLUMNS.map(([k, label]) =>
      `<th data-key="${k}">${label}${state.sort === k ? (state.desc ? " ▼" : " ▲") : ""}</th>`).join("") + "</tr>";
    const body = rows.map((e) => `<tr class="episode${e.id === state.selected ? " selected" : ""}" data-id="${e.id}">` +
      COLUMNS.map(([k, , d]) => `<td>${fmt(e[k], d)}${k === "id" && e.validation ? " v" : ""}</td>`).join("") + "</tr>").join("");
    $("episodes").innerHTML = head + body;
    $("count").textContent = `${rows.length} of ${index.length} episodes`;
  }

  function escapeHtml(s) {
    return String(s).replace(/[&<>"]/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;" }[c]));
  }

  function showDetails(title, obj) {
    const lines = Object.entries(obj).map(([k, v]) =>
      `${k}: ${typeof v === "object" && v !== null ? JSON.stringify(v, null, 1) : v}`);
    $("details").textContent = title + "\n" + lines.join("\n");
  }

  function renderGantt(ep) {
    const total = Math.max(ep.duration, ...ep.spans.map((s) => s.end), 1e-6);
    const byLane = ep.lanes.map(() => []);
    ep.spans.forEach((s, i) => byLane[s.lane] && byLane[s.lane].push([s, i]));
    const html = ep.lanes.map((lane, li) => {
      const bars = byLane[li].map(([s, i]) => {
        const left = (100 * s.start) / total, width = Math.max((100 * (s.end - s.start)) / total, 0.05);
        const tip = `${s.kind} ${s.label} · stage ${s.stage} · ${(s.end - s.start).toFixed(3)} s` +
          (s.detail.tokens !== undefined ? ` · ${s.detail.tokens} tokens` : "") + (s.critical ? " · critical" : "");
        return `<div class="span ${s.kind}${s.critical ? " critical" : ""}" data-span="${i}" ` +
          `style="left:${left}%;width:${width}%" title="${escapeHtml(tip)}"></div>`;
      }).join("");
      return `<div class="lane${lane.critical && li > 0 ? " critical-lane" : ""}" data-lane="${li}">` +
        `<div class="lane-name" title="${escapeHtml(lane.name)}">${escapeHtml(lane.name)}</div>` +
        `<div class="track">${bars}</div></div>`;
    }).join("");
    $("gantt").innerHTML = html;
    $("axis").innerHTML = [0, 0.25, 0.5, 0.75, 1].map((f) => `<span>${(f * total).toFixed(2)} s</span>`).join("");
  }

  function renderSummary(ep) {
    const critical = ep.spans.filter((s) => s.critical && s.kind === "generate").length;
    $("summary").innerHTML =
      `<b>episode ${ep.id}</b><b>step ${fmt(ep.step)}${ep.validation ? " (validation)" : ""}</b>` +
      `<b>reward ${fmt(ep.reward, 3)}</b><b>critical path: <span id="critical-count">${critical}</span> steps</b>` +
      `<b>parl_critical_steps ${fmt(ep.critical_steps)}</b><b>total steps ${fmt(ep.total_steps)}</b>` +
      `<b>subagents ${ep.lanes.length - 1}</b><b>${ep.duration.toFixed(3)} s</b>` +
      (ep.node ? `<b>node ${escapeHtml(ep.node)}</b>` : "") +
      (ep.timed ? "" : "<b>(untimed record: no start/end times)</b>");
    $("task").textContent = "task: " + (ep.task || "");
    const rows = Object.entries(ep.accounting).filter(([k]) => k !== "parl_subagents")
      .map(([k, v]) => `${k}: ${JSON.stringify(v)}`);
    rows.push("critical path per stage: " + ep.critical_path.map((p) =>
      `s${p.stage}: ${p.main_steps} + ${p.sub_steps}` + (p.subagent >= 0 ? ` (subagent ${p.subagent})` : "")).join(", "));
    $("accounting").textContent = "accounting\n" + rows.join("\n");
  }

  async function select(id) {
    state.selected = id;
    document.body.dataset.rendered = "";
    const ep = await load(id);
    renderSummary(ep);
    renderGantt(ep);
    document.querySelectorAll("#episodes tr.selected").forEach((row) => row.classList.remove("selected"));
    const row = document.querySelector(`#episodes tr.episode[data-id="${id}"]`);
    if (row) row.classList.add("selected");
    $("gantt").onclick = (event) => {
      const bar = event.target.closest(".span"), name = event.target.closest(".lane-name");
      if (bar) {
        const s = ep.spans[+bar.dataset.span];
        showDetails(`${s.kind}: ${s.label} (lane ${ep.lanes[s.lane].name}, stage ${s.stage})`,
          { start: s.start.toFixed(4), end: s.end.toFixed(4), critical: s.critical, ...s.detail });
      } else if (name) {
        const lane = ep.lanes[+name.parentElement.dataset.lane];
        showDetails(`lane ${lane.name}`, lane);
      }
    };
    history.replaceState(null, "", "#episode=" + id);
    document.body.dataset.rendered = String(id);
    window.renderedAt = performance.now();
  }

  $("episodes").addEventListener("click", (event) => {
    const th = event.target.closest("th");
    if (th) {
      state.desc = state.sort === th.dataset.key ? !state.desc : false;
      state.sort = th.dataset.key;
      renderList();
      return;
    }
    const row = event.target.closest("tr.episode");
    if (row) select(+row.dataset.id);
  });
  ["f-step", "f-split", "f-par", "f-crit"].forEach((id) => $(id).addEventListener("input", renderList));
  $("f-highlight").addEventListener("change", (e) => $("gantt").classList.toggle("hide-critical", !e.target.checked));
  const steps = [...new Set(index.map((e) => e.step))].filter((s) => s !== null).sort((a, b) => a - b);
  $("f-step").innerHTML = '<option value="">all</option>' + steps.map((s) => `<option>${s}</option>`).join("");
  $("notes").textContent = meta.notes.join("; ");
  renderList();
  window.verlParl = { select, index };
  const wanted = /episode=(\d+)/.exec(location.hash);
  if (wanted) select(+wanted[1]);
  else if (index.length) select(filtered()[0].id);
  document.body.dataset.ready = "1";
})();
