// Replay: a slider and a stepper over the session's versions; each step shows the event and what it changed.
import { api, esc, getJSON } from "./common.js";

const root = document.getElementById("replay");
const sessionId = root.dataset.id;
const versions = Number(root.dataset.versions);
const slider = document.getElementById("slider");
const number = document.getElementById("version");
const out = document.getElementById("step");
let current = Number(root.dataset.version);
let request = 0;

function messages(list, sign) {
  return list.map((m) => `<li class="${sign === "+" ? "added" : "removed"} r-${esc(m.role)}">${sign} <b>${esc(m.role)}</b> ${esc(m.text)} <span class="dim">≈${Number(m.tokens).toLocaleString()}</span></li>`).join("");
}

const strip = document.getElementById("event-strip");
const per = Number(strip?.dataset.per ?? 1);
const ticks = Number(strip?.dataset.ticks ?? 1);

function markStrip() {  // the tick of the version shown
  strip?.querySelector("#strip-now")?.setAttribute("x", String(Math.floor((current - 1) / per) * (1000 / ticks)));
}

strip?.addEventListener("click", (event) => {
  const box = strip.getBoundingClientRect();
  const tick = Math.floor(((event.clientX - box.left) / box.width) * ticks);
  show(tick * per + 1);
});

async function show(version) {
  current = Math.min(Math.max(1, version), versions);
  slider.value = number.value = current;
  markStrip();
  history.replaceState(null, "", `?version=${current}`);
  const mine = ++request;
  const step = await getJSON(api(sessionId, `/replay/${current}`));
  if (mine !== request) return;
  const e = step.event;
  const moved = step.leaf_after !== e.id ? ` · leaf moved to <code>${esc(step.leaf_after ?? "(none)")}</code>` : "";
  const base = `/sessions/${encodeURIComponent(sessionId)}`;
  const contextLink = `${base}/context?version=${current}${step.leaf_after ? `&entry=${encodeURIComponent(step.leaf_after)}` : ""}`;
  out.innerHTML = `
    <h2 id="step-title">event ${Number(step.version)} of ${Number(step.versions)}: ${esc(e.type)} <code>${esc(e.id)}</code></h2>
    <p class="dim">${esc(new Date(e.timestamp).toLocaleString())} · ${step.entries.toLocaleString()} entries${moved}</p>
    <p class="gist">${esc(e.text)}</p>
    <p id="change">context: ${step.removed.length ? `-${step.removed.length} ` : ""}${step.added.length ? `+${step.added.length} ` : ""}= ${Number(step.context_size)} messages, ≈${step.estimated_tokens.toLocaleString()} tokens</p>
    <ul class="changes">${messages(step.removed, "-")}${messages(step.added, "+")}</ul>
    <p><a id="step-context" href="${contextLink}">the whole context at this version</a></p>`;
}

slider.addEventListener("input", () => show(Number(slider.value)));
number.addEventListener("change", () => show(Number(number.value)));
document.getElementById("first").addEventListener("click", () => show(1));
document.getElementById("prev").addEventListener("click", () => show(current - 1));
document.getElementById("next").addEventListener("click", () => show(current + 1));
document.getElementById("last").addEventListener("click", () => show(versions));
document.addEventListener("keydown", (event) => {
  if (event.target.tagName === "INPUT") return;
  if (event.key === "ArrowLeft") show(current - 1);
  if (event.key === "ArrowRight") show(current + 1);
});
show(current);
