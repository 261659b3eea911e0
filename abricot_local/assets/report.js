// The HTML report's script (abricot_local/report/html.py inlines it): vanilla, nothing fetched.
// It reads the JSON block #report-data and builds every element with createElement and
// textContent; no data ever goes through innerHTML.
(function () {
"use strict";
const T0 = performance.now();
const D = JSON.parse(document.getElementById("report-data").textContent);
const T1 = performance.now();
const S = D.strings;
const app = document.getElementById("app");
// The scored contexts come packed (gzip, base64) and are unpacked once, in the background.
let unpack = null;
function contexts() {
  if (!unpack) unpack = (async () => {
    if (typeof DecompressionStream === "undefined") throw new Error("this browser cannot unpack them (no DecompressionStream)");
    const bin = Uint8Array.from(atob(D.contexts), c => c.charCodeAt(0));
    const stream = new Blob([bin]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  })();
  return unpack;
}

function h(tag, props, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") e.textContent = v;
    else if (k === "cls") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of kids.flat(Infinity)) if (c !== null && c !== undefined && c !== false) e.append(c);
  return e;
}
const svgNS = "http://www.w3.org/2000/svg";
function s(tag, attrs, text) {
  const e = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
  if (text !== undefined) e.textContent = text;
  return e;
}
function num(v) {  // infinities come as "inf" / "-inf", a NaN as null (JSON has neither)
  return v === "inf" ? Infinity : v === "-inf" ? -Infinity : v;
}
function fmt(v, d) {
  v = num(v);
  if (Number.isFinite(v)) return v.toFixed(d === undefined ? 3 : d);
  return v === Infinity ? "inf" : v === -Infinity ? "-inf" : "nan";
}
function pval(p) {
  p = num(p);
  return !Number.isFinite(p) ? "nan" : p < 0.001 ? p.toExponential(1) : String(+p.toPrecision(2));
}
function signed(v, d) { v = num(v); return (v > 0 ? "+" : "") + fmt(v, d); }
function factText(v) {
  if (typeof v === "number") return String(+v.toFixed(4));
  if (typeof v === "string") return v;
  if (Array.isArray(v) && v.every(x => typeof x !== "object")) return v.join(", ");
  return JSON.stringify(v);
}
function pct(p) { return Number.isFinite(p) ? Math.round(p * 100) + "%" : "?"; }
function softmax(lp) {
  const m = Math.max(...lp), e = lp.map(x => Math.exp(x - m)), t = e.reduce((a, b) => a + b, 0);
  return e.map(x => x / t);
}
function probs(e) { return e.prob || (e.prob = softmax(e.lp.map(num))); }
function runLabel(k) { const r = D.runs[k]; return r.label; }

// -- header and runs --------------------------------------------------------------------------
function header() {
  const nav = h("nav", {}, h("a", {href: "#leaderboard", text: "Leaderboard"}), h("a", {href: "#figures", text: "Figures"}),
    h("a", {href: "#pairwise", text: "Pairwise"}), h("a", {href: "#items", text: "Items"}),
    h("a", {href: "#quant", text: "Quantization"}), h("a", {href: "#prompts", text: "Prompts"}));
  return h("header", {}, h("h1", {text: "abricot-local report"}),
    h("div", {cls: "muted", text: D.runs.length + " run(s), generated " + D.generated}), nav);
}

function runsTable() {
  const tasks = [...new Set(D.runs.flatMap(r => Object.keys(r.tasks)))];
  const head = h("tr", {}, h("th", {text: "run"}), h("th", {text: "quant"}), h("th", {text: "backend"}),
    tasks.map(t => h("th", {cls: "num", text: t + " n"})), h("th", {text: "folder"}));
  const rows = D.runs.map(r => h("tr", {},
    h("td", {}, r.label, r.synthetic ? h("span", {cls: "badge fake", text: r.backend + " backend, not a model"}) : null),
    h("td", {text: r.quant}), h("td", {text: r.backend}),
    tasks.map(t => h("td", {cls: "num", text: r.tasks[t] === undefined ? "" : String(r.tasks[t])})),
    h("td", {cls: "muted", text: r.folder})));
  const warnings = D.runs.flatMap(r => r.warnings.map(w => h("li", {}, h("strong", {text: r.label}), " " + w)));
  return [h("div", {cls: "scroll"}, h("table", {id: "runs-table"}, h("thead", {}, head), h("tbody", {}, rows))),
    warnings.length ? h("details", {cls: "note"}, h("summary", {text: warnings.length + " warning(s) recorded by the runs"}),
      h("ul", {}, warnings)) : null];
}

// -- leaderboard -------------------------------------------------------------------------------
const mounted = [];  // what runs once the page is in the document (measuring needs a layout)
function breakable(text) {  // a metric name that may wrap after its underscores
  return text.split("_").flatMap((part, i, all) => i < all.length - 1 ? [part + "_", h("wbr")] : [part]);
}
function inBest(key, run) {
  const g = D.pairwise.best[key];
  return g && run !== null && g.members.includes(run) ? g : null;
}

function leaderboard() {
  const sec = h("section", {id: "leaderboard"}, h("h2", {text: "Leaderboard"}),
    h("p", {cls: "note", text: "Value and 95% CI (an accuracy\u2019s: Wilson\u2019s; a correlation\u2019s: bootstrap) as recorded in each results.json. Published rows are " +
      "values reported elsewhere (no CI). The last row is each metric's chance level. Click a header to sort. " +
      "\u25C6 marks each metric's best group: the best run and the runs not distinguishable from it (paired test " +
      "over the items the runs share, Holm-adjusted p \u2265 " + D.pairwise.alpha + "; see Pairwise)."}));
  const table = h("table", {id: "leaderboard-table"});
  const textCols = [["label", "model"], ["quant", "quant"], ["source", "source"]];
  let sortKey = null, sortDir = 0;
  const ths = [];
  function th(key, kids, num) {
    const cell = h("th", {"data-key": key, cls: num ? "num" : null},
      h("button", {cls: "sort", type: "button", onclick: () => sortBy(key)}, kids));
    ths.push(cell);
    return cell;
  }
  const head = h("tr", {}, textCols.map(([k, t]) => th(k, [t])),
    D.columns.map(c => th(c.key, [h("span", {cls: "task", text: c.task}), breakable(c.metric)], true)));
  const body = h("tbody");
  const rows = D.rows.map((r, i) => {
    const tr = h("tr", {cls: r.kind, "data-kind": r.kind, "data-index": i},
      h("td", {}, h("span", {cls: "name", text: r.label}), r.kind === "published" ? h("span", {cls: "badge", text: "published"}) :
        (D.runs[r.run].synthetic ? h("span", {cls: "badge fake", text: D.runs[r.run].backend}) : null)),
      h("td", {text: r.quant}), h("td", {cls: "source", text: r.source}),
      D.columns.map(c => {
        const v = r.cells[c.key];
        if (!v) return h("td", {cls: "num"});
        const g = r.kind === "run" && Number.isFinite(num(v[0])) ? inBest(c.key, r.run) : null;  // a nan: no mark
        return h("td", {cls: "num" + (g ? " best" : ""), "data-value": v[0] === null ? "nan" : v[0], "data-best": g ? "1" : null},
          g ? h("span", {cls: "bestmark", title: (g.best === r.run ? "the best run" : "not distinguishable from the best run, " +
            D.runs[g.best].label) + " on " + c.key, text: "\u25C6 "}) : null, fmt(v[0]),
          v[1] !== null || v[2] !== null ? h("span", {cls: "ci", text: "[" + fmt(v[1]) + ", " + fmt(v[2]) + "]"}) :
            v.length > 3 ? h("span", {cls: "ci", title: v[3] || null, text: "no interval"}) : null);  // withheld: why
      }));
    return {r, i, tr};
  });
  function value(row, key) {
    if (key === "label" || key === "quant" || key === "source") return row.r[key] || null;
    const v = row.r.cells[key];
    return v && Number.isFinite(num(v[0])) ? num(v[0]) : null;
  }
  function sortBy(key) {
    sortDir = key === sortKey ? -sortDir : (textCols.some(c => c[0] === key) ? 1 : -1);
    sortKey = key;
    const sorted = rows.slice().sort((a, b) => {
      const x = value(a, key), y = value(b, key);
      if (x === null || y === null) return (x === null) - (y === null) || a.i - b.i;
      const c = typeof x === "string" ? x.localeCompare(y) : x - y;
      return c * sortDir || a.i - b.i;
    });
    for (const t of ths) t.removeAttribute("aria-sort");
    ths.find(t => t.getAttribute("data-key") === key).setAttribute("aria-sort", sortDir > 0 ? "ascending" : "descending");
    body.replaceChildren(...sorted.map(x => x.tr));
  }
  body.replaceChildren(...rows.map(x => x.tr));
  const foot = h("tfoot", {}, h("tr", {cls: "chance"}, h("td", {text: "chance level"}), h("td"), h("td", {text: "uniform guess"}),
    D.columns.map(c => h("td", {cls: "num", text: c.chance === null ? "" : fmt(c.chance, 2)}))));
  table.append(h("thead", {}, head), body, foot);
  const box = h("div", {cls: "scroll"}, table);
  sec.append(columnChooser(table, box), box);
  if (D.checks.length) {
    sec.append(h("h3", {text: "Did the run reproduce the published value? (90% CI of run \u2212 published against the margin)"}), h("div", {cls: "scroll"}, h("table", {id: "checks-table"},
      h("thead", {}, h("tr", {}, ["run", "reference", "task", "published", "run value [95% CI]", "verdict", "reasons and notes"].map(t => h("th", {text: t})))),
      h("tbody", {}, D.checks.map(c => h("tr", {}, h("td", {text: c.label}), h("td", {text: c.reference}), h("td", {text: c.task}),
        h("td", {cls: "num", text: fmt(c.published, 2)}),
        h("td", {cls: "num", text: fmt(c.value) + (c.ci ? " [" + fmt(c.ci[0]) + ", " + fmt(c.ci[1]) + "]" : "")}),
        h("td", {text: c.verdict}), h("td", {cls: "muted", text: c.notes.join("; ")})))))));
  }
  return sec;
}

// The leaderboard shows the metric columns that fit the page's width: each task's first metric,
// then the metrics with a CI, then the rest, in that order, as long as the table does not
// scroll sideways. The chooser shows or hides any column (then the fitting stops).
function columnChooser(table, box) {
  const first = 3;  // run, quant, source
  const order = [...D.columns.keys()].sort((a, b) => rank(a) - rank(b) || a - b);
  function rank(k) {
    const c = D.columns[k];
    if (D.primary.includes(c.key)) return 0;
    return D.rows.some(r => r.cells[c.key] && r.cells[c.key][1] !== null) ? 1 : 2;
  }
  let auto = true;
  const shown = new Set(D.columns.keys());
  const boxes = D.columns.map((c, k) => h("input", {type: "checkbox", "data-column": c.key, checked: true,
    onchange: ev => { auto = false; ev.target.checked ? shown.add(k) : shown.delete(k); apply(); }}));
  const summary = h("summary");
  const chooser = h("details", {cls: "columns", id: "leaderboard-columns"}, summary,
    h("div", {cls: "column-list"}, [...new Set(D.columns.map(c => c.task))].map(task => h("fieldset", {},
      h("legend", {text: task}), D.columns.map((c, k) => c.task === task ? h("label", {}, boxes[k], " " + c.metric) : null)))),
    h("button", {type: "button", text: "fit to the page", onclick: () => { auto = true; fit(); }}));
  function apply() {
    for (const tr of table.querySelectorAll("tr")) {
      D.columns.forEach((c, k) => { const cell = tr.children[first + k]; if (cell) cell.hidden = !shown.has(k); });
    }
    D.columns.forEach((c, k) => { boxes[k].checked = shown.has(k); });
    summary.textContent = "Columns: " + shown.size + " of " + D.columns.length + " metrics shown" +
      (auto && shown.size < D.columns.length ? " (the others do not fit the page's width; choose here)" : " (choose)");
    table.setAttribute("data-shown", shown.size);
  }
  function fit() {
    if (!auto) return;
    shown.clear();
    apply();
    for (const k of order) {
      shown.add(k);
      apply();
      if (table.scrollWidth > box.clientWidth && shown.size > 1) { shown.delete(k); apply(); break; }
    }
  }
  apply();
  mounted.push(fit);
  let pending = null;
  window.addEventListener("resize", () => { clearTimeout(pending); pending = setTimeout(fit, 150); });
  return chooser;
}

// -- pairwise ----------------------------------------------------------------------------------
function pairSettings(a, b, which = "differs") {  // "one_side": what only one side's door records (said apart)
  const x = Math.min(a, b), y = Math.max(a, b);
  const found = D.pairwise.settings.find(p => p.a === x && p.b === y);
  return ((found && found[which]) || []).map(([k, va, vb]) => x === a ? [k, va, vb] : [k, vb, va]);
}

function settingLines(rows) {
  return rows.map(([k, va, vb]) => "  " + k + ": " + va + " / " + vb).join("\n");
}

function pairwise() {
  const P = D.pairwise;
  const sec = h("section", {id: "pairwise"}, h("h2", {text: "Pairwise"}),
    h("p", {cls: "note", text: "Each pair of runs over the items both scored alike (same id and scored context), " +
      "per task: the verdict, and the difference row \u2212 column of the task's main metric (named in the cell " +
      "when it could not be tested and another was) with its 95% " +
      "paired CI (an accuracy's: Tango's score interval; a correlation's: the bootstrap's) and the test's p (Holm-adjusted over the pairs of the task). Hover a cell for the " +
      "verdict and the recorded settings that differ (apart: those only one side records, an lm-eval output's own); " +
      "click it for the details. `abricot-local compare` gives every metric."}));
  if (!P.tasks.length) sec.append(h("p", {cls: "note", text: D.runs.length < 2 ? "One run: nothing to pair." :
    "No task was scored by two runs on common items."}));
  for (const t of P.tasks) {
    const detail = h("div", {cls: "pair-detail", "data-task": t.task});
    const head = h("tr", {}, h("th", {text: "row \u2212 column"}), t.runs.map(k => h("th", {text: runLabel(k)})));
    const rows = t.runs.map(i => h("tr", {}, h("th", {text: runLabel(i)}), t.runs.map(j => {
      if (i === j) return h("td", {cls: "self", text: "\u2014"});
      const c = t.cells.find(x => (x.a === i && x.b === j) || (x.a === j && x.b === i));
      if (!c) return h("td", {cls: "verdict not-comparable", "data-a": i, "data-b": j, "data-kind": "",
        text: "no common items"});
      const sign = c.a === i ? 1 : -1;
      const differs = pairSettings(i, j), ones = pairSettings(i, j, "one_side");
      const title = c.line + "\n" + (differs.length ? "settings that differ (" + runLabel(i) + " / " + runLabel(j) + "):\n" +
        settingLines(differs) : "no recorded setting differs") +
        (ones.length ? "\n" + P.one_side + " (" + runLabel(i) + " / " + runLabel(j) + "):\n" + settingLines(ones) : "");
      const kids = [h("div", {cls: "kind", text: c.kind})];
      if (c.metric && c.metric !== t.metric) kids.push(h("div", {cls: "metric", text: c.metric}));  // the main one untested
      if (c.metric && new Set(t.cells.map(x => x.n)).size > 1) kids.push(h("div", {cls: "n", text: "n = " + c.n}));  // each pair its own items
      if (c.metric) {
        const lo = sign > 0 ? c.ci[0] : -num(c.ci[1]), hi = sign > 0 ? c.ci[1] : -num(c.ci[0]);
        kids.push(h("div", {cls: "diff", text: "\u0394 " + signed(sign * num(c.diff), 3) + " [" + signed(lo, 3) + ", " + signed(hi, 3) + "]"}),
          h("div", {cls: "p", text: "p = " + pval(c.p)}));
      }
      return h("td", {cls: "verdict " + c.kind.replace(/ /g, "-"), tabindex: 0, title, "data-a": i, "data-b": j,
        "data-kind": c.kind, onclick: () => show(c, i, j)}, kids);
    })));
    function show(c, i, j) {
      const differs = pairSettings(i, j), ones = pairSettings(i, j, "one_side");
      const rows = list => list.map(([k, va, vb]) => h("tr", {}, h("td", {text: k}), h("td", {text: va}), h("td", {text: vb})));
      const kids = [h("p", {text: c.line}),
        h("table", {cls: "settings"}, h("thead", {}, h("tr", {}, h("th", {text: "setting that differs"}),
          h("th", {text: runLabel(i)}), h("th", {text: runLabel(j)}))),
          h("tbody", {}, differs.length ? rows(differs) : h("tr", {}, h("td", {text: "(none recorded)"}), h("td"), h("td"))))];
      if (ones.length) kids.push(h("p", {cls: "note", text: P.one_side}),
        h("table", {cls: "settings one-side"}, h("thead", {}, h("tr", {}, h("th", {text: "setting one side records"}),
          h("th", {text: runLabel(i)}), h("th", {text: runLabel(j)}))), h("tbody", {}, rows(ones))));
      detail.replaceChildren(...kids);
    }
    sec.append(h("h3", {text: t.task + " \u00b7 " + t.metric + " \u00b7 " + t.n.join(" / ") + " common items"}),
      h("div", {cls: "scroll"}, h("table", {cls: "pairwise", "data-task": t.task}, h("thead", {}, head), h("tbody", {}, rows))));
    if (t.notes.length) sec.append(h("p", {cls: "note", text: t.notes.join("; ")}));
    sec.append(detail);
  }
  if (P.notes.length) sec.append(h("ul", {cls: "note"}, P.notes.map(n => h("li", {text: n}))));
  return sec;
}

// -- figures ---------------------------------------------------------------------------------
// A forest plot as report/forest.py laid it out (every text in a band of its own, none over another):
// its shapes drawn as they come; a name's whole text (a long one is cut in its middle) is its tooltip.
function forest(fig) {
  if (!fig.shapes.length) return h("figure", {}, h("figcaption", {text: fig.caption}));
  const svg = s("svg", {width: fig.width, height: fig.height, viewBox: "0 0 " + fig.width + " " + fig.height, role: "img"});
  for (const [tag, attrs, text, whole] of fig.shapes) {
    if (whole === undefined) { svg.append(s(tag, attrs, text)); continue; }
    const label = s("g", {class: "label"});
    label.append(s("title", {}, whole), s(tag, attrs, text));
    svg.append(label);
  }
  return h("figure", {}, svg, h("figcaption", {text: fig.caption}));
}

function figures() {
  const sec = h("section", {id: "figures"}, h("h2", {text: "Figures"}));
  const box = h("div", {cls: "figs"}, D.forests.map(forest));
  for (const f of D.figures) {
    if (!/^data:image\/png;base64,[A-Za-z0-9+\/=]+$/.test(f.src)) continue;
    box.append(h("figure", {}, h("img", {src: f.src, alt: f.caption, loading: "lazy"}), h("figcaption", {text: f.caption})));
  }
  sec.append(box);
  if (D.figuresNote) sec.append(h("p", {cls: "note", text: D.figuresNote}));
  return sec;
}

// -- item explorer ---------------------------------------------------------------------------
const PAGE = 50;

function contextOf(C, task, item, e) {
  const base = task.prefix + C[item.c];
  if (!e || e.c === undefined) return base;
  if (Array.isArray(e.c)) return C[e.c[0]] + base + C[e.c[1]];
  return C[e.c];
}
function choicesOf(item, e) { return (e && e.ch ? e.ch : item.ch).map(k => S[k]); }
function goldOf(item, e) { return e && e.g !== undefined ? e.g : item.g; }

function prepare(task) {
  for (const it of task.items) {
    const answers = new Set();
    let present = 0, wrong = 0;
    it.m.forEach(e => {
      if (!e) return;
      present++;
      e.ok = e.p === goldOf(it, e);
      if (!e.ok) wrong++;
      answers.add(choicesOf(it, e)[e.p]);
    });
    it.disagree = present > 1 && answers.size > 1;
    it.allwrong = present > 0 && wrong === present;
  }
}

function explorer(task, ti) {
  prepare(task);
  const labels = it => it.lab || task.labels;
  const st = {disagree: false, allwrong: false, decisive: false, neartie: false, fixed: false, broken: false,
    stillwrong: false, source: "", q: "", page: 0,
    selected: null};
  const count = h("span", {cls: "count"});
  const body = h("tbody");
  const detail = h("div", {cls: "detail", id: "detail-" + task.name},
    h("p", {cls: "muted", text: "Click an item to see the exact scored context and every choice's log-prob."}));
  const prev = h("button", {type: "button", text: "\u2190 previous", onclick: () => { st.page--; draw(); }});
  const next = h("button", {type: "button", text: "next \u2192", onclick: () => { st.page++; draw(); }});
  let shown = task.items;
  function filter() {
    const q = st.q.trim().toLowerCase();
    shown = task.items.filter(it => (!st.disagree || it.disagree) && (!st.allwrong || it.allwrong) &&
      (!st.decisive || it.chg === 2) && (!st.neartie || it.chg === 1) &&
      (!st.fixed || (it.out & 1)) && (!st.broken || (it.out & 2)) && (!st.stillwrong || (it.out & 4)) &&
      (!st.source || it.src === st.source) && (!q || it.id.toLowerCase().includes(q)));
    st.page = 0;
    draw();
  }
  function row(it) {
    const lab = labels(it);
    const tr = h("tr", {tabindex: 0, "data-id": it.id, cls: it === st.selected ? "selected" : null},
      h("td", {text: it.id}), h("td", {text: it.src}),
      task.columns.map(c => { const v = it.x[c]; return h("td", {cls: typeof v === "number" ? "num" : null,
        text: v === undefined || v === null ? "" : (typeof v === "number" && !Number.isInteger(v) ? fmt(v, 2) : String(v))}); }),
      h("td", {title: S[it.ch[it.g]], text: lab[it.g]}),
      it.m.map(e => e ? h("td", {cls: e.ok ? "ok" : "bad", title: choicesOf(it, e)[e.p],
        text: lab[e.p] + " " + pct(probs(e)[e.p])}) : h("td", {cls: "gone", text: "\u00b7"})));
    const pick = () => { st.selected = it; for (const r of body.children) r.classList.toggle("selected", r === tr); show(it); };
    tr.addEventListener("click", pick);
    tr.addEventListener("keydown", ev => { if (ev.key === "Enter" || ev.key === " ") { ev.preventDefault(); pick(); } });
    return tr;
  }
  function draw() {
    const pages = Math.max(1, Math.ceil(shown.length / PAGE));
    st.page = Math.min(Math.max(st.page, 0), pages - 1);
    const a = st.page * PAGE, b = Math.min(shown.length, a + PAGE);
    body.replaceChildren(...shown.slice(a, b).map(row));
    count.textContent = shown.length + " of " + task.items.length + " items" +
      (shown.length ? ", showing " + (a + 1) + "\u2013" + b : "");
    count.setAttribute("data-count", shown.length);
    prev.disabled = st.page === 0; next.disabled = st.page >= pages - 1;
  }
  function show(it) {
    const lab = labels(it), ms = task.runs;
    const kids = [h("h3", {text: it.id + " \u00b7 " + it.src})];
    const facts = Object.entries(it.x);
    it.m.forEach((e, k) => { if (e && e.x) for (const [f, v] of Object.entries(e.x)) facts.push([f + " (" + runLabel(ms[k]) + ")", v]); });
    if (facts.length) kids.push(h("table", {cls: "facts"}, h("tbody", {}, facts.map(([f, v]) =>
      h("tr", {}, h("th", {text: f}), h("td", {text: factText(v)}))))));
    const own = it.m.some(e => e && e.ch);
    const groups = own ? it.m.map((e, k) => e ? [[e, k]] : null).filter(Boolean) : [it.m.map((e, k) => [e, k])];
    for (const g of groups) {
      const ref = g[0][0], choices = choicesOf(it, own ? ref : null), gold = goldOf(it, own ? ref : null);
      if (own) kids.push(h("h3", {text: "choices of " + runLabel(ms[g[0][1]])}));
      const plain = choices.every((c, j) => c === lab[j]);  // ABRICOT: the choices are the labels
      const head = h("tr", {}, h("th", {text: "label"}), plain ? null : h("th", {text: "choice"}),
        g.map(([e, k]) => h("th", {cls: "num", text: runLabel(ms[k])})));
      const rows = choices.map((c, j) => h("tr", {cls: j === gold ? "gold" : null},
        h("td", {text: lab[j] + (j === gold ? " (gold)" : "")}), plain ? null : h("td", {cls: "choice", text: c}),
        g.map(([e]) => e ? h("td", {cls: "num" + (j === e.p ? " pred" : "")}, h("span", {cls: "lp", text: fmt(e.lp[j], 4)}),
          h("span", {cls: "p", text: pct(probs(e)[j])})) : h("td", {text: "\u00b7"}))));
      kids.push(h("div", {cls: "scroll"}, h("table", {cls: "choices"}, h("thead", {}, head), h("tbody", {}, rows))));
    }
    kids.push(h("p", {cls: "muted", text: "Per run: the choice's log-prob, and below it its probability (the log-probs normalised over the choices); bold: the run's answer."}));
    const box = h("div", {cls: "contexts"}, h("p", {cls: "muted", text: "unpacking the scored contexts\u2026"}));
    kids.push(box);
    detail.replaceChildren(...kids);
    contexts().then(C => {
      const ctxs = it.m.map(e => e ? contextOf(C, task, it, e) : null);
      const distinct = new Set(ctxs.filter(c => c !== null));
      const out = [];
      if (distinct.size === 1) {
        out.push(h("h3", {text: "Scored context (the same for " + ctxs.filter(c => c !== null).length + " run(s))"}),
          h("pre", {cls: "ctx", "data-run": "all", text: [...distinct][0]}));
      } else {
        ctxs.forEach((c, k) => { if (c !== null) out.push(h("h3", {text: "Scored context: " + runLabel(ms[k])}),
          h("pre", {cls: "ctx", "data-run": runLabel(ms[k]), text: c})); });
      }
      box.replaceChildren(...out);
    }, err => box.replaceChildren(h("p", {cls: "note", text: "The scored contexts cannot be shown: " + err.message})));
  }
  const sources = h("select", {"data-filter": "source", onchange: ev => { st.source = ev.target.value; filter(); }},
    h("option", {value: "", text: "all sources"}), task.sources.map(x => h("option", {value: x, text: x})));
  const check = (key, text) => h("label", {}, h("input", {type: "checkbox", "data-filter": key,
    onchange: ev => { st[key] = ev.target.checked; filter(); }}), " " + text);
  // changed answers against each run's reference (compare's): decisive, or only near ties (top-two margin < nearTie)
  const filters = h("div", {cls: "filters"}, check("disagree", "models disagree"), check("allwrong", "all wrong"),
    h("span", {title: "an answer that differs from its reference run's: decisive when the reference's top two " +
      "choices were " + D.nearTie + " nats apart or more, else a near tie (a close call; between runs of one " +
      "model or its quants, kernels alone can flip it)"},
      check("decisive", "decisive changes"), check("neartie", "near-tie changes only")),
    h("span", {title: "an answer that differs from its reference run's, against the gold answer"},
      check("fixed", "fixed (wrong \u2192 right)"), check("broken", "broken (right \u2192 wrong)"),
      check("stillwrong", "wrong \u2192 other wrong")),
    h("label", {}, "source ", sources),
    h("label", {}, "id ", h("input", {type: "search", "data-filter": "search", placeholder: "filter by id",
      oninput: ev => { st.q = ev.target.value; filter(); }})), count);
  const head = h("tr", {}, h("th", {text: "id"}), h("th", {text: "source"}), task.columns.map(c => h("th", {text: c})),
    h("th", {text: "gold"}), task.runs.map(k => h("th", {text: runLabel(k)})));
  const table = h("table", {cls: "items"}, h("thead", {}, head), body);
  draw();
  return h("div", {cls: "task-panel", id: "explorer-" + task.name, "data-task": task.name, hidden: ti > 0},
    filters, h("div", {cls: "explorer"},
      h("div", {}, h("div", {cls: "scroll"}, table), h("div", {cls: "pager"}, prev, next)), detail));
}

function items() {
  const sec = h("section", {id: "items"}, h("h2", {text: "Items"}),
    h("p", {cls: "note", text: "One row per item: the gold answer, then one column per run, headed by the run's " +
      "label: its answer and its probability (softmax of the choices' log-probs); green when it is the gold answer."}));
  if (!D.tasks.length) return sec;
  // a task's panel is built when its tab is first opened
  const panels = D.tasks.map((t, i) => i === 0 ? explorer(t, 0) : h("div", {hidden: true}));
  const tabs = h("div", {cls: "tabs", role: "tablist"}, D.tasks.map((t, i) => h("button", {type: "button", role: "tab",
    "data-task": t.name, "aria-selected": i === 0 ? "true" : "false", text: t.name + " (" + t.items.length + ")",
    onclick: ev => {
      for (const b of tabs.children) b.setAttribute("aria-selected", String(b === ev.currentTarget));
      if (!panels[i].classList.contains("task-panel")) {
        const built = explorer(t, i);
        panels[i].replaceWith(built);
        panels[i] = built;
      }
      panels.forEach((p, j) => { p.hidden = j !== i; });
    }})));
  sec.append(tabs, ...panels);
  return sec;
}

// -- quantization ----------------------------------------------------------------------------
function quant() {
  const sec = h("section", {id: "quant"}, h("h2", {text: "Quantization comparison"}));
  if (!D.quant.length) {
    // the text table's words (analysis/overview.py no_pairs): where the ladders left runs out, their notes say why
    sec.append(h("p", {cls: "note", text: D.quantEmpty}));
    if ((D.ladderNotes || []).length) sec.append(ladder());
    return sec;
  }
  sec.append(h("p", {cls: "note", text: "Runs of one base model at different quants, over the items both scored: " +
    "agreement = share of items with the same answer; KL = mean KL(ref || other) in nats between the choices' distributions."}));
  const cols = ["base", "task", "reference (higher precision)", "other", "common items", "agreement", "mean KL", "notes"];
  sec.append(h("div", {cls: "scroll"}, h("table", {id: "quant-table"}, h("thead", {}, h("tr", {}, cols.map(c => h("th", {text: c})))),
    h("tbody", {}, D.quant.map(q => h("tr", {}, h("td", {text: q.base}), h("td", {text: q.task}),
      h("td", {text: q.ref + (q.refQuant ? " (" + q.refQuant + ")" : "")}),
      h("td", {text: q.other + (q.otherQuant ? " (" + q.otherQuant + ")" : "")}),
      h("td", {cls: "num", text: String(q.n)}), h("td", {cls: "num", text: fmt(q.agreement)}),
      h("td", {cls: "num", text: fmt(q.kl, 4)}), h("td", {cls: "muted", text: q.notes.join("; ")})))))));
  if (D.ladder.length || (D.ladderNotes || []).length) sec.append(ladder());
  return sec;
}

// a ladder row's KLD: its text (mean, 95% CI over the items, or why there is none, and the items and tokens it
// covers, report/ladder.py); without one, the mean, the CI only where both ends are numbers, what it covers
function kldText(k) {
  if (!k) return "";
  if (typeof k.text === "string" && k.text) return k.text;
  const mean = num(k.mean), ci = (k.ci95 || []).map(num);
  const parts = [Number.isFinite(mean) ? fmt(mean, 4) : "no mean"];
  if (ci.length === 2 && ci.every(Number.isFinite)) parts.push("[" + fmt(ci[0], 4) + ", " + fmt(ci[1], 4) + "]");
  else parts.push("(no CI)");
  if (k.covers) parts.push(k.covers);
  return parts.join(" ");
}

function ladder() {  // each quant against the highest-precision one of its model (analysis/ladder.py)
  // what a quant costs and buys (size, speed, its verdict, its KLD) first, the table whole in a 1400 px window
  const cols = ["model", "task", "quant", "run", "items", "verdict", "size MB", "items/s", "difference [90% CI]",
    "KLD mean [95% CI]", "KLD p99", "same top", "same answer", "label KL", "answers changed"];
  const ci = v => v ? signed(v.diff, 3) + " [" + signed(v.ci90[0], 3) + ", " + signed(v.ci90[1], 3) + "]" : "";
  const notes = D.ladderNotes || [];
  // the verdict and answers-changed cells say their short forms (a rule's verdict: report/ladder.py's short_verdict;
  // the answers changed: how many, how many decisive); where the whole says more (a rule's look, its interval and
  // guarantee, compare's fixed-n verdict beside it; the changes' outcomes, the decisive ones' ids) it is listed under
  // the table, its number beside the short form
  const short = r => r.verdict_short ?? r.verdict_text;
  const changed = r => !r.changed ? "" : r.changed.n ? r.changed.n + " (" + r.changed.decisive.length + " decisive)" : "none";
  const whole = r => [short(r) !== r.verdict_text ? "verdict: " + r.verdict_text : "",
    r.changed && changed(r) !== r.changed.line ? r.changed.line : "",
    r.changed && r.changed.decisive.length ? "the decisive ones: " + r.changed.decisive.join(", ") : ""]
    .filter(Boolean).join("; ");
  const more = D.ladder.filter(r => whole(r));
  const mark = (r, text) => {  // a short form, and the number of its rung's line under the table where it shortens
    const k = more.indexOf(r) + 1;
    return [text, k && text ? h("a", {cls: "more", href: "#ladder-whole-" + k, text: " [" + k + "]"}) : null];
  };
  const verdictCell = r => h("td", {cls: "verdict", title: r.verdict ?
    [r.verdict.line, r.verdict.like_line || ""].join("\n").trim() : ""},
    ...(short(r) !== r.verdict_text ? mark(r, short(r)) : [short(r)]));
  const changedCell = r => h("td", {cls: "changed"}, ...(r.changed && changed(r) !== r.changed.line ?
    mark(r, changed(r)) : [changed(r)]));
  return h("div", {id: "ladder"}, h("h3", {text: "Quant ladder"}),
    h("p", {cls: "note", text: "Each quant against the highest-precision quant of its model, on the task's primary " +
      "metric with the task's margin (a rung an --until-settled rule judged: the rule's verdict at its look, in full " +
      "under the table with the fixed-n one at the rule's margin; 90% CI of quant - reference), beside what it costs " +
      "and buys: the file size and the items/s the run measured. Answers changed: how many of the reference's near ties (its top two " +
      "choices closer than 0.5 nats: a quant or kernels alone can flip them) and of its decisive answers flipped. " +
      "Label KL: KL(reference || quant) of the answer labels; KLD: over the " +
      "whole vocabulary at every token of the task text (abricot-local kld), when measured."}),
    D.ladder.length ? h("div", {cls: "scroll"}, h("table", {id: "ladder-table"}, h("thead", {}, h("tr", {}, cols.map(c => h("th", {text: c})))),
      h("tbody", {}, D.ladder.map(r => h("tr", {"data-verdict": r.verdict ? r.verdict.kind : "reference"},
        h("td", {text: r.base}), h("td", {text: r.task}), h("td", {text: r.quant}), h("td", {text: r.run}),
        h("td", {cls: "num", text: String(r.n)}),
        verdictCell(r),
        h("td", {cls: "num", text: r.size_bytes === null ? "" : fmt(r.size_bytes / 1e6, 0)}),
        h("td", {cls: "num", text: r.items_per_s === null ? "" : fmt(r.items_per_s, 2)}),
        h("td", {cls: "num", text: r.difference_text ?? ci(r.verdict)}),
        h("td", {cls: "num kld", text: kldText(r.kld)}),
        h("td", {cls: "num", text: r.kld ? fmt(r.kld.p99, 4) : ""}),
        h("td", {cls: "num", text: r.kld ? fmt(r.kld.same_top) : ""}),
        h("td", {cls: "num", text: r.reference ? fmt(r.same_pred) : ""}),
        h("td", {cls: "num", text: r.reference ? fmt(r.kl_mean, 4) : ""}),
        changedCell(r)))))) :
      h("p", {cls: "note", text: "No ladder: every run that could be a rung is left out, as said below."}),
    more.length ? h("div", {id: "ladder-whole"}, h("p", {cls: "note", text: "The verdicts and answers changed in full:"}),
      h("ol", {cls: "note"}, more.map((r, k) => h("li", {id: "ladder-whole-" + (k + 1),
        text: r.quant + " (" + r.base + ", " + r.task + "): " + whole(r)})))) : null,
    // which quant to keep: each ladder's line (report/ladder.py's choice, on its reference row), what its verdicts support
    ...D.ladder.filter(r => r.choice).map(r => h("p", {cls: "ladder-choice", text: r.choice.line})),
    notes.length ? h("ul", {cls: "note", id: "ladder-notes"}, notes.map(n => h("li", {text: n}))) : null);
}

// -- does the prompt matter? (report/prompts.py: tables of strings) ------------------------------
function prompts() {
  const sec = h("section", {id: "prompts"}, h("h2", {text: "Does the prompt matter?"}));
  if (!(D.prompts || []).length) {
    sec.append(h("p", {cls: "note", text: "No run holds a task under two or more prompt variants (run --prompt-variant all)."}));
    return sec;
  }
  for (const b of D.prompts) {
    if (b.title) sec.append(h("h3", {text: b.title}));
    if (b.columns.length) {
      sec.append(h("div", {cls: "scroll"}, h("table", {cls: "prompts"}, h("thead", {}, h("tr", {}, b.columns.map(c => h("th", {text: c})))),
        h("tbody", {}, b.rows.map(r => h("tr", {}, r.map(v => h("td", {text: v}))))))));
    }
    for (const line of b.lines) sec.append(h("p", {cls: "note", text: line}));
  }
  return sec;
}

app.append(header(), h("main", {}, h("section", {id: "runs"}, h("h2", {text: "Runs"}), runsTable()),
  leaderboard(), pairwise(), figures(), items(), quant(), prompts()));
for (const f of mounted) f();
window.abricotReport = {startAt: T0, parsedAt: T1, readyAt: performance.now()};
window.addEventListener("load", () => { for (const f of mounted) f(); setTimeout(contexts, 0); });
})();
