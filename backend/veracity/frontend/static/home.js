// The home page's question counter. The textarea has no maxlength on purpose: a browser would cut a pasted
// question at the limit without a word. Here the whole question stays in the box, the counter says how long it is
// and by how much it is over, and the form will not submit until it fits (the server refuses it too, with the same
// numbers, for a browser without this script).
(() => {
  "use strict";
  const format = (n) => n.toLocaleString("en-US");
  // Characters as the server counts them: code points of the question without the spaces around it.
  const length = (text) => [...text.trim()].length;

  const update = (box, counter) => {
    const limit = Number.parseInt(counter.dataset.limit || "0", 10);
    const n = length(box.value);
    const over = n - limit;
    if (over > 0) {
      const message = `${format(n)} / ${format(limit)} characters: ${format(over)} over the limit. Shorten the question to submit it.`;
      counter.textContent = message;
      box.setCustomValidity(message);
      box.setAttribute("aria-invalid", "true");
    } else {
      counter.textContent = `${format(n)} / ${format(limit)} characters`;
      box.setCustomValidity("");
      box.removeAttribute("aria-invalid");
    }
    counter.classList.toggle("over", over > 0);
    counter.dataset.count = String(n);
  };

  document.addEventListener("DOMContentLoaded", () => {
    const box = document.getElementById("question");
    const counter = document.getElementById("question-count");
    if (!box || !counter) return;
    update(box, counter);
    box.addEventListener("input", () => update(box, counter));
  });
})();
