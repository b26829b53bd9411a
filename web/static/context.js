// The context page: a clipped block's "show all" fetches the whole block and puts it in place.
import { getJSON } from "./common.js";

document.getElementById("messages")?.addEventListener("click", async (event) => {
  const button = event.target.closest("button.more");
  if (!button) return;
  button.disabled = true;
  try {
    const data = await getJSON(button.dataset.src);
    button.previousElementSibling.textContent = data.text;
    button.remove();
  } catch (error) {
    button.textContent = `could not load: ${error.message}`;
  }
});
