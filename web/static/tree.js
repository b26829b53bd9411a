// A session's tree as a virtualised list: only the rows in view (plus a margin) exist in the DOM; windows of rows
// are fetched from the tree endpoint as the view scrolls. Clicking a row shows the entry and what can be done there.
import { api, esc, getJSON, post, verifyBadge } from "./common.js";

const ROW = 22;       // px per row (app.css .row height)
const CHUNK = 200;    // rows per fetch
const MARGIN = 20;    // rows drawn above and below the view

const section = document.querySelector("section.session");
const sessionId = section.dataset.id;
const box = document.getElementById("tree");
const spacer = box.querySelector(".spacer");
const panel = document.getElementById("entry");
const first = JSON.parse(document.getElementById("tree-data").textContent);
const mode = first.filter;
const total = first.total;
const chunks = new Map();   // chunk number -> rows (or a pending promise)
let selected = null;

spacer.style.height = `${total * ROW}px`;
for (const row of first.rows) putRow(row);

function putRow(row) {
  const n = Math.floor(row.index / CHUNK);
  if (!(chunks.get(n) instanceof Array)) chunks.set(n, new Array(CHUNK));
  chunks.get(n)[row.index % CHUNK] = row;
}

function rowAt(i) {
  const chunk = chunks.get(Math.floor(i / CHUNK));
  return chunk instanceof Array ? chunk[i % CHUNK] : undefined;
}

function load(n) {
  const have = chunks.get(n);
  if (have instanceof Promise) return have;
  if (have instanceof Array && have.every((r) => r !== undefined) && have.length === Math.min(CHUNK, total - n * CHUNK)) return null;
  const pending = getJSON(api(sessionId, `/tree?filter=${encodeURIComponent(mode)}&start=${n * CHUNK}&count=${CHUNK}`))
    .then((data) => { chunks.delete(n); for (const row of data.rows) putRow(row); draw(); })
    .catch(() => chunks.delete(n));
  chunks.set(n, pending);
  return pending;
}

function rowHTML(row) {
  const marks = [];
  if (row.leaf) marks.push('<span class="leaf">◀ leaf</span>');
  if (row.leaf_below) marks.push('<span class="leaf">◀ leaf below</span>');
  if (row.label) marks.push(`<span class="label">[${esc(row.label)}]</span>`);
  if (row.children > 1) marks.push(`<span class="fork">⑂ ${row.children}</span>`);
  if (row.tool_problems) marks.push(`<span class="problems" title="sessiontree check: the tool calls of this branch's context">⚠ ${row.tool_problems} tool-call problem(s)</span>`);
  const cls = ["row", `t-${row.type}`, row.role ? `r-${row.role}` : "", row.on_branch ? "on" : "off",
    row.id === selected ? "selected" : ""].join(" ");
  return `<div class="${cls}" data-index="${row.index}" data-id="${esc(row.id)}" data-depth="${row.depth}">`
    + `<code>${esc(row.id)}</code> ${marks.join(" ")} <span class="text">${esc(row.text)}</span></div>`;
}

function draw() {
  const top = Math.max(0, Math.floor(box.scrollTop / ROW) - MARGIN);
  const end = Math.min(total, Math.ceil((box.scrollTop + box.clientHeight) / ROW) + MARGIN);
  const parts = [];
  for (let i = top; i < end; i += 1) {
    const row = rowAt(i);
    if (row) parts.push(rowHTML(row));
    else { load(Math.floor(i / CHUNK)); parts.push(`<div class="row pending" data-index="${i}" data-depth="0">…</div>`); }
  }
  spacer.innerHTML = parts.join("");
  for (const element of spacer.children) {  // positions set through the CSSOM: the page's CSP allows no inline styles
    element.style.top = `${Number(element.dataset.index) * ROW}px`;
    element.style.paddingLeft = `${8 + Number(element.dataset.depth) * 18}px`;
  }
}

let scheduled = false;
box.addEventListener("scroll", () => {
  if (scheduled) return;
  scheduled = true;
  requestAnimationFrame(() => { scheduled = false; draw(); });
});

box.addEventListener("click", (event) => {
  const element = event.target.closest(".row[data-id]");
  if (element && element.classList.contains("pending")) return;
  if (!element) return;
  const row = rowAt(Number(element.dataset.index));
  selected = row.id;
  draw();
  showEntry(row);
});

function showEntry(row) {
  const base = `/sessions/${encodeURIComponent(sessionId)}`;
  const leaf = section.dataset.leaf;
  panel.innerHTML = `
    <h2><code>${esc(row.id)}</code> ${esc(row.type)}${row.role ? ` · ${esc(row.role)}` : ""}</h2>
    <p class="dim">${esc(new Date(row.timestamp).toLocaleString())}${row.label ? ` · label <b>${esc(row.label)}</b>` : ""}</p>
    <p class="gist">${esc(row.text)}</p>
    <p class="actions">
      <a id="to-context" href="${base}/context?entry=${encodeURIComponent(row.id)}">context here</a>
      <a id="to-diff" href="${base}/diff?a=${encodeURIComponent(leaf)}&b=${encodeURIComponent(row.id)}">diff with the leaf</a>
    </p>
    <form id="label-form"><input name="label" value="${esc(row.label ?? "")}" placeholder="label"> <button>set label</button></form>
    <form id="move-form"><input name="summary" placeholder="summary of the branch left (optional)"> <button>move the leaf here</button></form>
    <p id="write-result" class="dim"></p>`;
  panel.querySelector("#label-form").addEventListener("submit", (event) => {
    event.preventDefault();
    write("/label", { entry: row.id, label: event.target.label.value || null });
  });
  panel.querySelector("#move-form").addEventListener("submit", (event) => {
    event.preventDefault();
    write("/move", { entry: row.id, summary: event.target.summary.value || null });
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

if (first.focus !== null) box.scrollTop = Math.max(0, first.focus * ROW - box.clientHeight / 2);
draw();
getJSON(api(sessionId)).then((s) => {
  document.getElementById("usage").textContent =
    `${s.message_count.toLocaleString()} messages · ${s.total_tokens.toLocaleString()} tokens · $${s.cost_total.toFixed(4)}`;
}, () => { document.getElementById("usage").textContent = "(usage unavailable)"; });
getJSON(api(sessionId, "/verify")).then((report) => verifyBadge(document.getElementById("verify"), report),
  () => { document.getElementById("verify").textContent = "verify failed"; });
