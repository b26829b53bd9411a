// The sessions list: filter by name or cwd; each row's entries, tokens, cost and verify badge load as it comes into view.
import { api, getJSON, verifyBadge } from "./common.js";

const filter = document.getElementById("filter");
const rows = [...document.querySelectorAll("#sessions tbody tr")];
const shown = document.getElementById("shown");

function applyFilter() {
  const needle = filter.value.trim().toLowerCase();
  let count = 0;
  for (const row of rows) {
    const hit = !needle || row.dataset.name.includes(needle) || row.dataset.cwd.includes(needle);
    row.hidden = !hit;
    if (hit) count += 1;
  }
  shown.textContent = `${count} of ${rows.length} sessions`;
}
filter?.addEventListener("input", applyFilter);

for (const cell of document.querySelectorAll("td.time")) {
  const when = new Date(cell.dataset.time);
  if (!Number.isNaN(when.getTime())) cell.textContent = when.toLocaleString();
}

const queue = [];
let running = 0;
function pump() {
  while (running < 2 && queue.length) {
    const row = queue.shift();
    running += 1;
    fill(row).finally(() => { running -= 1; pump(); });
  }
}

// Each loaded row's tokens as a bar under the figure, against the largest loaded so far: the heavy sessions stand out.
function scale() {
  const loaded = rows.filter((r) => r.dataset.tokens !== undefined);
  const most = Math.max(1, ...loaded.map((r) => Number(r.dataset.tokens)));
  for (const r of loaded) {
    const cell = r.querySelector('[data-field="total_tokens"]');
    let bar = cell.querySelector(".spark");
    if (!bar) {
      bar = document.createElement("span");
      bar.className = "spark";
      cell.append(bar);
    }
    bar.style.width = `${(Number(r.dataset.tokens) / most) * 100}%`;  // CSSOM: the page's CSP allows no inline styles
  }
}

async function fill(row) {
  const id = row.dataset.id;
  const cell = (field) => row.querySelector(`[data-field="${field}"]`);
  const badge = cell("verify").firstElementChild;
  try {  // the verify report first: a log too damaged to open as a session still gets one
    verifyBadge(badge, await getJSON(api(id, "/verify")));
  } catch (error) {
    badge.textContent = "verify failed";
    badge.title = error.message;
  }
  try {
    const s = await getJSON(api(id));
    cell("entries").textContent = s.entries.toLocaleString();
    cell("total_tokens").textContent = s.total_tokens.toLocaleString();
    row.dataset.tokens = String(s.total_tokens);
    scale();
    cell("cost_total").textContent = `$${s.cost_total.toFixed(4)}`;
  } catch (error) {
    for (const field of ["entries", "total_tokens", "cost_total"]) { cell(field).textContent = "-"; cell(field).title = error.message; }
  }
  row.dataset.loaded = "1";
}

const seen = new IntersectionObserver((entries) => {
  for (const entry of entries) {
    if (entry.isIntersecting) { seen.unobserve(entry.target); queue.push(entry.target); }
  }
  pump();
});
rows.forEach((row) => seen.observe(row));
