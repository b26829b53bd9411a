// A session's tree as a virtualised list: only the rows in view (plus a margin) exist in the DOM; windows of rows
// are fetched from the tree endpoint as the view scrolls. Each row draws its connecting lines (the server's
// `guides`, one per indent level) as SVG, so side branches read as branches. A branch can be folded: its rows leave
// the list and its first row says how many it holds and what its summary said. Clicking a row shows the whole entry.
// Everything from the session goes through esc() before it becomes markup.
import { api, esc, getJSON, post, verifyBadge } from "./common.js";

const ROW = 24;       // px per row (app.css .row height)
const INDENT = 18;    // px per indent level
const CHUNK = 200;    // rows per fetch
const MARGIN = 20;    // rows drawn above and below the view

const section = document.querySelector("section.session");
const sessionId = section.dataset.id;
const box = document.getElementById("tree");
const spacer = box.querySelector(".spacer");
const panel = document.getElementById("entry");
const first = JSON.parse(document.getElementById("tree-data").textContent);
const mode = first.filter;
const readOnly = first.read_only;
const folded = new Set(first.fold);
let total = first.total;
let chunks = new Map();   // chunk number -> rows (or a pending promise)
let selected = null;
let generation = 0;       // bumped when the folding changes: answers for an older folding are dropped

export const FORK_ICON = '<svg class="icon fork-icon" viewBox="0 0 16 16" width="14" height="14" aria-hidden="true">'
  + '<circle cx="4" cy="3" r="1.8"/><circle cx="4" cy="13" r="1.8"/><circle cx="12" cy="6" r="1.8"/>'
  + '<path d="M4 4.8v6.4M4 9c0-2 8-1 8-3.2" fill="none"/></svg>';

function reset(data) {
  total = data.total;
  chunks = new Map();
  spacer.style.height = `${total * ROW}px`;
  for (const row of data.rows) putRow(row);
  document.getElementById("row-count").textContent = `${total.toLocaleString()} rows${folded.size ? ` (${folded.size} folded)` : ""}`;
}

function putRow(row) {
  const n = Math.floor(row.index / CHUNK);
  if (!(chunks.get(n) instanceof Array)) chunks.set(n, new Array(CHUNK));
  chunks.get(n)[row.index % CHUNK] = row;
}

function rowAt(i) {
  const chunk = chunks.get(Math.floor(i / CHUNK));
  return chunk instanceof Array ? chunk[i % CHUNK] : undefined;
}

function treeURL(start, count) {
  const fold = folded.size ? `&fold=${[...folded].map(encodeURIComponent).join(",")}` : "";
  return api(sessionId, `/tree?filter=${encodeURIComponent(mode)}&start=${start}&count=${count}${fold}`);
}

function load(n) {
  const have = chunks.get(n);
  if (have instanceof Promise) return have;
  if (have instanceof Array && have.every((r) => r !== undefined) && have.length === Math.min(CHUNK, total - n * CHUNK)) return null;
  const mine = generation;
  const pending = getJSON(treeURL(n * CHUNK, CHUNK))
    .then((data) => { if (mine !== generation) return; chunks.delete(n); for (const row of data.rows) putRow(row); draw(); })
    .catch(() => chunks.delete(n));
  chunks.set(n, pending);
  return pending;
}

// The connecting lines of one row: per level, │ (a branch goes on below), ├ or └ (this row starts a branch), or
// nothing; the last level's stroke takes the row's colour (on or off the current branch).
function guidesSVG(row) {
  const levels = [...(row.guides ?? "")];
  if (!levels.length) return "";
  const width = levels.length * INDENT;
  const mid = ROW / 2;
  const parts = levels.map((g, k) => {
    const x = k * INDENT + INDENT / 2;
    if (g === "│") return `<path d="M${x} 0V${ROW}"/>`;
    if (g === "├") return `<path d="M${x} 0V${ROW}M${x} ${mid}H${x + INDENT / 2 + 2}"/>`;
    if (g === "└") return `<path d="M${x} 0V${mid}H${x + INDENT / 2 + 2}"/>`;
    return "";
  });
  return `<svg class="guides" width="${width}" height="${ROW}" viewBox="0 0 ${width} ${ROW}" aria-hidden="true">${parts.join("")}</svg>`;
}

function rowHTML(row) {
  const marks = [];
  if (row.leaf) marks.push('<span class="leaf">leaf</span>');
  if (row.leaf_below) marks.push('<span class="leaf">leaf below</span>');
  if (row.label) marks.push(`<span class="label">${esc(row.label)}</span>`);
  if (row.children > 1) marks.push(`<span class="fork" title="branch point: ${row.children} branches">${FORK_ICON} ${row.children}</span>`);
  if (row.tool_problems) marks.push(`<span class="problems" title="sessiontree check: the tool calls of this branch's context">⚠ ${Number(row.tool_problems)} tool-call problem(s)</span>`);
  const fold = row.branch_start
    ? `<button class="fold" data-fold="${esc(row.id)}" title="${row.folded ? "unfold" : "fold"} this branch">${row.folded ? "▸" : "▾"}</button>`
    : (row.guides ? '<span class="fold-space"></span>' : "");  // a branch's rows line up under its first
  const hidden = row.folded
    ? `<span class="folded">+${(row.folded.rows).toLocaleString()} rows folded${row.folded.summary ? ` · summary: ${esc(row.folded.summary)}` : ""}</span>`
    : "";
  const cls = ["row", `t-${esc(row.type)}`, row.role ? `r-${esc(row.role)}` : "", row.on_branch ? "on" : "off",
    row.id === selected ? "selected" : "", row.folded ? "is-folded" : ""].join(" ");
  return `<div class="${cls}" data-index="${Number(row.index)}" data-id="${esc(row.id)}">`
    + `${guidesSVG(row)}${fold}<span class="dot"></span><code>${esc(row.id)}</code> ${marks.join(" ")} `
    + `<span class="text">${esc(row.text)}</span>${hidden}</div>`;
}

function draw() {
  const top = Math.max(0, Math.floor(box.scrollTop / ROW) - MARGIN);
  const end = Math.min(total, Math.ceil((box.scrollTop + box.clientHeight) / ROW) + MARGIN);
  const parts = [];
  for (let i = top; i < end; i += 1) {
    const row = rowAt(i);
    if (row) parts.push(rowHTML(row));
    else { load(Math.floor(i / CHUNK)); parts.push(`<div class="row pending" data-index="${i}">…</div>`); }
  }
  spacer.innerHTML = parts.join("");
  for (const element of spacer.children) {  // positions set through the CSSOM: the page's CSP allows no inline styles
    element.style.top = `${Number(element.dataset.index) * ROW}px`;
  }
}

let scheduled = false;
box.addEventListener("scroll", () => {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(() => { scheduled = false; draw(); });
});

async function refold(id) {
  if (folded.has(id)) folded.delete(id); else folded.add(id);
  const url = new URL(location.href);
  if (folded.size) url.searchParams.set("fold", [...folded].join(",")); else url.searchParams.delete("fold");
  history.replaceState(null, "", url);
  generation += 1;
  const mine = generation;
  const anchor = Math.floor(box.scrollTop / ROW);
  const data = await getJSON(treeURL(Math.max(0, anchor - 40), 200));
  if (mine !== generation) return;
  reset(data);
  draw();
}

box.addEventListener("click", (event) => {
  const toggle = event.target.closest("button.fold");
  if (toggle) { event.stopPropagation(); refold(toggle.dataset.fold); return; }
  const element = event.target.closest(".row[data-id]");
  if (!element || element.classList.contains("pending")) return;
  const row = rowAt(Number(element.dataset.index));
  selected = row.id;
  draw();
  showEntry(row);
});

function factsHTML(entry) {
  const facts = [...entry.facts];
  if (entry.usage) {
    const u = entry.usage;
    facts.push(["tokens", `in ${u.input.toLocaleString()} · out ${u.output.toLocaleString()} · cache ${(u.cache_read + u.cache_write).toLocaleString()} · total ${u.total_tokens.toLocaleString()}`]);
    facts.push(["cost", `$${u.cost.total.toFixed(4)} (in $${u.cost.input.toFixed(4)}, out $${u.cost.output.toFixed(4)})`]);
  }
  return facts.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${esc(v)}</dd>`).join("");
}

const PART_TITLES = { text: "text", thinking: "thinking", tool_call: "tool call", image: "image", details: "details",
  stored: "the entry as stored", unknown: "block" };

function partHTML(part) {
  const more = part.more_chars
    ? `<button class="more" data-part="${Number(part.index)}">show all (${part.more_lines.toLocaleString()} more lines, ${part.more_chars.toLocaleString()} more characters)</button>`
    : "";
  const title = PART_TITLES[part.kind] ?? part.kind;
  const body = `<pre class="block ${esc(part.kind)}">${esc(part.text)}</pre>${more}`;
  if (part.kind === "stored") return `<details class="part stored"><summary>${esc(title)}</summary>${body}</details>`;
  return `<div class="part"><h4>${esc(title)}</h4>${body}</div>`;
}

let shown = 0;
async function showEntry(row) {
  const mine = ++shown;
  const base = `/sessions/${encodeURIComponent(sessionId)}`;
  const leaf = section.dataset.leaf;
  panel.innerHTML = `<h2><code>${esc(row.id)}</code> ${esc(row.type)}${row.role ? ` · ${esc(row.role)}` : ""}</h2><p class="dim">loading…</p>`;
  let entry;
  try {
    entry = await getJSON(api(sessionId, `/entry?entry=${encodeURIComponent(row.id)}`));
  } catch (error) {
    panel.querySelector("p").textContent = `could not load the entry: ${error.message}`;
    return;
  }
  if (mine !== shown) return;
  const writes = readOnly ? `<p class="dim" id="read-only-note">read-only: ${esc(first.read_only_reason)}</p>` : `
    <form id="label-form"><label for="label-box">label</label> <input id="label-box" name="label" value="${esc(entry.label ?? "")}" placeholder="a name for this entry"> <button>set label</button></form>
    <form id="move-form"><label for="summary-box">move the leaf here</label> <input id="summary-box" name="summary" placeholder="summary of the branch left (optional)"> <button>move the leaf here</button></form>
    <p id="write-result" class="dim"></p>`;
  panel.innerHTML = `
    <h2><code>${esc(entry.id)}</code> ${esc(entry.type)}${entry.role ? ` · ${esc(entry.role)}` : ""}${entry.leaf ? ' <span class="leaf">leaf</span>' : ""}</h2>
    <p class="dim">${esc(new Date(entry.timestamp).toLocaleString())}${entry.label ? ` · label <span class="label">${esc(entry.label)}</span>` : ""}
      · parent <code>${esc(entry.parent_id ?? "(root)")}</code>${entry.children > 1 ? ` · ${entry.children} branches below` : ""}</p>
    <p class="actions">
      <a id="to-context" class="button" href="${base}/context?entry=${encodeURIComponent(entry.id)}">context at this entry</a>
      <a id="to-diff" class="button" href="${base}/diff${entry.leaf ? "" : `?a=${encodeURIComponent(leaf)}&b=${encodeURIComponent(entry.id)}`}">${entry.leaf ? "diff with another branch" : "diff with the leaf"}</a>
    </p>
    <dl class="facts">${factsHTML(entry)}</dl>
    <div id="parts">${entry.parts.map(partHTML).join("")}</div>
    ${writes}`;
  panel.querySelector("#parts").addEventListener("click", async (event) => {
    const button = event.target.closest("button.more");
    if (!button) return;
    button.disabled = true;
    try {
      const whole = await getJSON(api(sessionId, `/entry?entry=${encodeURIComponent(entry.id)}&part=${button.dataset.part}`));
      button.previousElementSibling.textContent = whole.text;
      button.remove();
    } catch (error) {
      button.textContent = `could not load: ${error.message}`;
    }
  });
  if (readOnly) return;
  panel.querySelector("#label-form").addEventListener("submit", (event) => {
    event.preventDefault();
    write("/label", { entry: entry.id, label: event.target.label.value || null });
  });
  panel.querySelector("#move-form").addEventListener("submit", (event) => {
    event.preventDefault();
    write("/move", { entry: entry.id, summary: event.target.summary.value || null });
  });
}

async function write(path, body) {
  const out = panel.querySelector("#write-result");
  try {
    await post(api(sessionId, path), body);
    location.reload();
  } catch (error) {
    out.textContent = error.message;
  }
}

document.getElementById("rename")?.addEventListener("submit", (event) => {
  event.preventDefault();
  post(api(sessionId, "/name"), { name: event.target.name.value || null }).then(() => location.reload(),
    (error) => { document.getElementById("session-name").textContent += ` (${error.message})`; });
});

document.getElementById("tree-filter")?.addEventListener("change", (event) => {
  location.search = `?filter=${encodeURIComponent(event.target.value)}`;
});

reset(first);
if (first.focus !== null) box.scrollTop = Math.max(0, first.focus * ROW - box.clientHeight / 2);
draw();
getJSON(api(sessionId)).then((s) => {
  document.getElementById("usage").textContent =
    `${s.message_count.toLocaleString()} messages · ${s.total_tokens.toLocaleString()} tokens · $${s.cost_total.toFixed(4)}`;
}, () => { document.getElementById("usage").textContent = "(usage unavailable)"; });
getJSON(api(sessionId, "/verify")).then((report) => verifyBadge(document.getElementById("verify"), report),
  () => { document.getElementById("verify").textContent = "verify failed"; });
