// The diff page is rendered on the server; picking another branch tip compares at once.
const form = document.getElementById("diff-form");
for (const select of form?.querySelectorAll("select") ?? []) {
  select.addEventListener("change", () => form.requestSubmit());
}
