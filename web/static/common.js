// Shared helpers: escaping, JSON fetches with the token, writes.
export const token = document.querySelector('meta[name="sessiontree-token"]')?.content ?? "";

export function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

export async function getJSON(url) {
  const response = await fetch(url, { credentials: "same-origin", headers: { "X-Sessiontree-Token": token } });
  const data = await response.json();
  if (!response.ok) throw new Error(data?.error?.message ?? `HTTP ${response.status}`);
  return data;
}

export async function post(url, body) {
  const response = await fetch(url, {
    method: "POST", credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-Sessiontree-Token": token },
    body: JSON.stringify(body),
  });
  const data = await response.json();
  if (!response.ok) throw new Error(data?.error?.message ?? `HTTP ${response.status}`);
  return data;
}

export function api(sessionId, path = "") {
  return `/api/sessions/${encodeURIComponent(sessionId)}${path}`;
}

export function verifyBadge(element, report) {
  element.classList.remove("ok", "bad", "warn");
  if (report.ok) {
    element.classList.add(report.chained ? "ok" : "warn");
    element.textContent = report.chained ? "chain ok" : "ok (not chained)";
    const erased = (report.redactions ?? []).length;  // erasures the chain vouches for (docs/audit.md)
    if (erased) element.textContent += `, ${erased} erased`;
  } else {
    element.classList.add("bad");
    element.textContent = report.first_bad_line ? `bad at line ${report.first_bad_line}` : "does not verify";
  }
  element.title = report.summary ?? "";
}
