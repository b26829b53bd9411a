// The search page: Escape clears the box; the results are rendered on the server.
const box = document.querySelector('input[name="q"]');
box?.addEventListener("keydown", (event) => {
  if (event.key === "Escape") box.value = "";
});
