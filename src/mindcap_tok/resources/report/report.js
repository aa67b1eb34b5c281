// Glue of report.html: draws the plotly figures and runs the trace viewer (tables.js sorts the tables).
// Hand-written because it is page-specific wiring (a few dozen lines); the plotting itself is plotly's.
"use strict";
(function () {
  const figures = JSON.parse(document.getElementById("figures-data").textContent);
  for (const [id, spec] of Object.entries(figures)) {
    Plotly.newPlot(id, spec.data, spec.layout, { responsive: true, displaylogo: false });
  }

  const traces = JSON.parse(document.getElementById("traces-data").textContent);
  if (!traces.length) return;
  const $ = (id) => document.getElementById(id);
  const ALL = "(all)";
  function fill(select, values, keep) {
    const old = select.value;
    select.replaceChildren(...values.map(([v, text]) => new Option(text, v)));
    if (keep && values.some(([v]) => v === old)) select.value = old;
  }
  const uniq = (xs) => Array.from(new Set(xs)).sort();
  fill($("tv-lang"), [[ALL, ALL], ...uniq(traces.map((t) => t.lang)).map((v) => [v, v])]);
  fill($("tv-arm"), [[ALL, ALL], ...uniq(traces.map((t) => t.arm)).map((v) => [v, v])]);
  fill($("tv-outcome"), [[ALL, ALL], ...["correct", "cut", "never answered", "wrong"].map((v) => [v, v])]);
  const budgets = uniq(traces.flatMap((t) => t.budgets.map((b) => b.B))).sort((a, b) => a - b);
  fill($("tv-budget"), budgets.map((b) => [String(b), String(b)]));

  const pair = (t) => t.budgets.find((b) => String(b.B) === $("tv-budget").value);
  function matching() {
    const lang = $("tv-lang").value, arm = $("tv-arm").value, outcome = $("tv-outcome").value;
    return traces.filter((t) => (lang === ALL || t.lang === lang) && (arm === ALL || t.arm === arm)
      && (outcome === ALL || t.outcome === outcome)
      && (!$("tv-window").checked || ((p) => p && p.score_B === 0 && p.score_rB === 1)(pair(t))));
  }
  function refreshCells() {
    const found = matching();
    $("tv-matches").textContent = `${found.length} of ${traces.length} shown traces match`;
    fill($("tv-cell"), uniq(found.map((t) => t.cell)).map((c) => [c, c]), true);
    refreshTraces();
  }
  function refreshTraces() {
    const cell = $("tv-cell").value;
    const found = matching().filter((t) => t.cell === cell);
    fill($("tv-trace"), found.map((t) => [String(traces.indexOf(t)),
      `item ${t.item} · sample ${t.sample} · ${t.outcome}`]), true);
    show();
  }
  function show() {
    const t = traces[Number($("tv-trace").value)];
    const view = $("tv-view");
    view.hidden = !t;
    if (!t) return;
    const p = pair(t) || {};
    const marks = [
      ["B", `B = ${p.B}`, p.B, p.score_B],
      ["rB", `floor(r·B) = ${p.rB}`, p.rB, p.score_rB],
      ["E", "first answer (E)", t.emission, t.emission === null ? null : t.correct],
      ["think", "thought closed", t.thought_end, null],
      ["cap", `cap = ${t.cap}`, t.cap, t.cap !== null && t.cap <= t.n_tokens ? t.correct : null],
    ].filter((m) => m[2] !== null && m[2] !== undefined);
    const facts = [["cell", t.cell], ["item · sample", `${t.item} · ${t.sample}`], ["outcome", t.outcome],
      ["finish reason", t.finish_reason], ["output tokens", t.n_tokens], ["gold", t.gold]];
    if (t.thinking) {
      facts.push(["thought", t.thought_end === null ? "never closed: the whole trace is thought, no answer channel"
        : `closes after token ${t.thought_end}; answers are read after it`]);
    }
    $("tv-facts").replaceChildren(...facts.map(([k, v]) => {
      const tr = document.createElement("tr");
      tr.append(Object.assign(document.createElement("th"), { textContent: k }),
        Object.assign(document.createElement("td"), { textContent: v === null ? "—" : String(v) }));
      return tr;
    }));
    $("tv-marks").tBodies[0].replaceChildren(...marks.map(([kind, label, pos, score]) => {
      const tr = document.createElement("tr");
      tr.dataset.mark = kind;
      tr.dataset.pos = pos;
      const where = pos > t.n_tokens ? `${pos} (after the trace's end, ${t.n_tokens} tokens)` : String(pos);
      tr.append(...[label, where, score === null || score === undefined ? "—" : String(score)].map(
        (s) => Object.assign(document.createElement("td"), { textContent: s })));
      return tr;
    }));
    $("tv-prompt").textContent = t.prompt;
    // the text cut at each mark's character offset (marks after the trace's end are listed, not drawn)
    const drawn = marks.filter((m) => m[2] <= t.n_tokens && t.offsets[String(m[2])] !== undefined)
      .map(([kind, label, pos]) => ({ kind, label, pos, at: t.offsets[String(pos)] }))
      .sort((a, b) => a.at - b.at || a.pos - b.pos);
    const lo = p.B <= t.n_tokens ? t.offsets[String(p.B)] : null;
    const hi = p.rB <= t.n_tokens ? t.offsets[String(p.rB)] : t.text.length;
    const cuts = uniq([0, t.text.length, ...drawn.map((m) => m.at), ...(lo === null ? [] : [lo, hi])].map(Number))
      .sort((a, b) => a - b);
    const out = [];
    for (let i = 0; i < cuts.length; i++) {
      for (const m of drawn.filter((d) => d.at === cuts[i])) {
        out.push(Object.assign(document.createElement("span"), {
          className: "tv-mark", textContent: m.label, title: `token ${m.pos}`,
        }));
        out[out.length - 1].dataset.mark = m.kind;
        out[out.length - 1].dataset.pos = m.pos;
      }
      if (i + 1 < cuts.length) {
        const seg = document.createElement("span");
        seg.textContent = t.text.slice(cuts[i], cuts[i + 1]);
        if (lo !== null && cuts[i] >= lo && cuts[i + 1] <= hi) seg.className = "tv-window";
        out.push(seg);
      }
    }
    $("tv-text").replaceChildren(...out);
  }
  for (const id of ["tv-lang", "tv-arm", "tv-outcome", "tv-budget", "tv-window"]) {
    $(id).addEventListener("change", refreshCells);
  }
  $("tv-cell").addEventListener("change", refreshTraces);
  $("tv-trace").addEventListener("change", show);
  refreshCells();
})();
