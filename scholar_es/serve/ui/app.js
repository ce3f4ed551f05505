// The search page: plain JavaScript, no build step. It calls the search API under /_scholar/.
"use strict";

const API = "/_scholar";
const SECTIONS = ["abstract", "introduction", "related_work", "background", "method", "experiments",
  "results", "discussion", "conclusion", "limitations", "other"];
const STOP = new Set(["the", "and", "for", "are", "was", "were", "what", "which", "how", "does", "did",
  "with", "from", "that", "this", "they", "their", "into", "about", "used", "use", "can", "why", "when"]);
let strategyInfo = {};
let offset = 0;  // the papers skipped: the API's `from`

const $ = (sel, root = document) => root.querySelector(sel);

function el(tag, attrs = {}, text = "") {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text) node.textContent = text;
  return node;
}

async function api(path, body) {
  const resp = await fetch(API + path, body === undefined ? {} : {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body),
  });
  const data = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    const reason = data.error && (data.error.reason || data.error) || resp.statusText;
    throw new Error(`${resp.status}: ${reason}`);
  }
  return data;
}

function filters() {
  const f = {};
  const yf = $("#year-from").value, yt = $("#year-to").value;
  if (yf) f.year_min = Number(yf);
  if (yt) f.year_max = Number(yt);
  const venues = $("#venue").value.split(",").map(s => s.trim()).filter(Boolean);
  if (venues.length) f.venues = venues;
  const secs = [...document.querySelectorAll("#sections input:checked")].map(i => i.value);
  if (secs.length) f.section_types = secs;
  return Object.keys(f).length ? f : null;
}

// Words of the question worth marking: lower-cased, stop words out, cut to a rough stem.
function terms(question) {
  const words = question.toLowerCase().match(/[\p{L}\p{N}]+/gu) || [];
  return [...new Set(words.filter(w => w.length > 2 && !STOP.has(w)).map(w => w.slice(0, 6)))];
}

function highlighted(text, stems) {
  const node = document.createElement("div");
  node.className = "chunk-text";
  if (!stems.length) { node.textContent = text; return node; }
  const escaped = stems.map(s => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const rx = new RegExp(`(?<![\\p{L}\\p{N}])(?:${escaped.join("|")})[\\p{L}\\p{N}]*`, "giu");
  let last = 0;
  for (const m of text.matchAll(rx)) {
    node.append(document.createTextNode(text.slice(last, m.index)));
    node.append(el("mark", {}, m[0]));
    last = m.index + m[0].length;
  }
  node.append(document.createTextNode(text.slice(last)));
  return node;
}

function scoreBar(hit, maxScore) {
  const bar = el("span", {class: "bar", title: "no score parts for this strategy"});
  const parts = hit.score_bar;
  if (!parts || maxScore <= 0) return bar;
  bar.title = `BM25 ${parts.bm25.toFixed(3)} + kNN ${parts.knn.toFixed(3)} + section ${parts.section.toFixed(3)}`;
  for (const name of ["bm25", "knn", "section"]) {
    const value = Math.max(parts[name], 0);
    const seg = el("span", {class: `seg ${name}`, "data-part": name, "data-value": String(parts[name])});
    seg.style.width = `${(100 * value / maxScore).toFixed(2)}%`;
    bar.append(seg);
  }
  return bar;
}

function chunkNode(hit, maxScore, stems, best) {
  const chunk = el("div", {class: best ? "chunk best" : "chunk", "data-chunk-id": hit.chunk_id});
  const head = el("div", {class: "chunk-head"});
  head.append(el("span", {class: `badge ${hit.section_type}`}, hit.section_type || "other"));
  head.append(el("span", {class: "heading muted"}, hit.section_heading));
  head.append(scoreBar(hit, maxScore));
  head.append(el("span", {class: "score muted"}, hit.score.toFixed(4)));
  chunk.append(head, highlighted(hit.chunk_text || hit.snippet, stems));
  return chunk;
}

function renderColumn(strategy, result, question) {
  const col = $("#column-template").content.firstElementChild.cloneNode(true);
  col.dataset.strategy = strategy;
  $(".strategy-name", col).textContent = strategy;
  $(".summary", col).textContent = (strategyInfo[strategy] || {}).description || "";
  $(".meta", col).textContent =
    `${result.total ?? "?"} matching chunks · intent ${result.intent_rule} · ${result.took_ms} ms`;
  const stems = terms(question);
  const all = result.papers.flatMap(p => p.chunks);
  const maxScore = Math.max(0, ...all.map(h => h.score));
  const list = $(".papers", col);
  list.start = offset + 1;
  for (const paper of result.papers) {
    const li = el("li", {class: "paper", "data-paper-id": paper.paper_id});
    li.append(el("div", {class: "paper-title"}, paper.title || paper.paper_id));
    const authors = paper.authors.length > 3 ? `${paper.authors.slice(0, 3).join(", ")} et al.`
      : paper.authors.join(", ");
    const meta = el("div", {class: "paper-meta muted"});
    for (const [cls, text] of [["authors", authors], ["year", paper.year], ["venue", paper.venue],
      ["paper-id", paper.paper_id], ["paper-score", `score ${paper.score.toFixed(4)}`]]) {
      if (text !== null && text !== undefined && text !== "") meta.append(el("span", {class: cls}, String(text)));
    }
    li.append(meta);
    if (paper.abstract) {
      const abs = el("details", {class: "abstract"});
      abs.append(el("summary", {}, "Abstract"), el("p", {}, paper.abstract));
      li.append(abs);
    }
    // the best paragraph (the paper's top-scoring chunk) shown; the others behind a toggle
    const [best, ...others] = paper.chunks;
    if (best) li.append(chunkNode(best, maxScore, stems, true));
    if (others.length) {
      const more = el("details", {class: "more"});
      more.append(el("summary", {}, `more from this paper (${others.length})`));
      for (const hit of others) more.append(chunkNode(hit, maxScore, stems, false));
      li.append(more);
    }
    list.append(li);
  }
  if (!result.papers.length) list.append(el("li", {class: "muted"}, "no results"));
  $(".copy-console", col).addEventListener("click", () => copyConsole(col, strategy, question));
  return col;
}

async function copyConsole(col, strategy, question) {
  const pre = $(".console", col);
  const button = $(".copy-console", col);
  try {
    // the request of the whole ranking (the API's /query takes no `from`: a page is cut from it)
    const q = await api("/query", {question, strategy, size: Number($("#size").value) || 5, papers: true,
      sort: $("#sort").value, filters: filters(), ...options(strategy, false)});
    pre.textContent = q.console;
    pre.hidden = false;
    try {
      await navigator.clipboard.writeText(q.console);
    } catch (e) {  // no clipboard permission: select the text so Ctrl-C copies it
      const range = document.createRange();
      range.selectNodeContents(pre);
      getSelection().removeAllRanges();
      getSelection().addRange(range);
      document.execCommand && document.execCommand("copy");
    }
    button.textContent = "Copied";
  } catch (e) {
    pre.textContent = String(e.message || e);
    pre.hidden = false;
  }
}

// The per-strategy options a strategy takes (GET /_scholar/strategies lists them): score parts
// where it explains, the stored heads ("default" when there is one) where it routes through heads.
function options(strategy, explain) {
  const info = strategyInfo[strategy] || {options: []};
  const out = {};
  if (explain && info.options.includes("explain")) out.explain = true;
  if (info.options.includes("heads") && info.heads && info.heads.length) {
    out.heads = info.heads.includes("default") ? "default" : info.heads[0];
  }
  return out;
}

// A new search starts at the first page; Previous/Next move by one page of `size` papers.
function search(event) {
  if (event) event.preventDefault();
  offset = 0;
  return showPage();
}

async function showPage() {
  const question = $("#question").value.trim();
  if (!question) return;
  document.body.dataset.state = "searching";
  const strategies = [$("#strategy-a").value, $("#strategy-b").value].filter(Boolean);
  const status = $("#status");
  status.className = "muted";
  status.textContent = "Searching…";
  const columns = $("#columns");
  const size = Number($("#size").value) || 5;
  try {
    const results = await Promise.all(strategies.map(strategy => api("/search", {
      question, strategy, size, papers: true, from: offset, sort: $("#sort").value, filters: filters(),
      // score parts (the bars) where the score ranks; sorted by year it does not
      ...options(strategy, $("#sort").value === "relevance"),
    })));
    columns.replaceChildren(...results.map((r, i) => renderColumn(strategies[i], r, question)));
    const shown = Math.max(0, ...results.map(r => r.papers.length));
    $("#pager").hidden = false;
    $("#prev").disabled = offset === 0;
    $("#next").disabled = shown < size;  // a full page may have more after it
    $("#page-info").textContent = shown ? `papers ${offset + 1}–${offset + shown}` : `no papers after ${offset}`;
    status.textContent = "";
    document.body.dataset.state = "done";
  } catch (e) {
    columns.replaceChildren();
    $("#pager").hidden = true;
    status.className = "error";
    status.textContent = String(e.message || e);
    document.body.dataset.state = "error";
  }
}

async function init() {
  const box = $("#sections");
  for (const s of SECTIONS) {
    const label = el("label");
    label.append(el("input", {type: "checkbox", value: s, name: "section"}), document.createTextNode(` ${s} `));
    box.append(label);
  }
  try {
    const list = await api("/strategies");
    for (const s of list.filter(s => s.available)) {  // heads strategies once heads are trained
      strategyInfo[s.name] = s;
      for (const id of ["#strategy-a", "#strategy-b"]) {
        const opt = el("option", {value: s.name, title: `${s.description} (${s.needs.summary})`}, s.name);
        $(id).append(opt);
      }
    }
    $("#strategy-a").value = "sections";
    const health = await api("/health");
    $("#health").textContent = `${health.engine} · ${health.target} · ${health.model}`;
  } catch (e) {
    $("#status").className = "error";
    $("#status").textContent = String(e.message || e);
  }
  $("#search-form").addEventListener("submit", search);
  $("#prev").addEventListener("click", () => { offset = Math.max(0, offset - (Number($("#size").value) || 5)); showPage(); });
  $("#next").addEventListener("click", () => { offset += Number($("#size").value) || 5; showPage(); });
  document.body.dataset.ready = "1";
}

init();
