// The usage page: clicking a model call or a branch in the charts opens the context there (the charts are SVG
// rendered on the server; this only makes them clickable).
const sessionId = location.pathname.split("/")[2];
for (const element of document.querySelectorAll("#calls-chart [data-entry], #branches-chart [data-tip]")) {
  element.addEventListener("click", () => {
    const entry = element.dataset.entry ?? element.dataset.tip;
    location.href = `/sessions/${sessionId}/context?entry=${encodeURIComponent(entry)}`;
  });
}
