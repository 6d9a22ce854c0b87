/* The head-importance grid (templates/_head_grid.html), shared by /ablation and /attention: writes
   each head's importance from /api/ablation/importance into its cell — the number, a colour whose
   strength is its size relative to the largest, ★ on the biggest effects. The numbers are the
   server's (model/explain/ablation.py's head_importance); nothing is computed here but the display. */
"use strict";

const ITTImportance = (() => {
  /** A head's number: Δ log p(translation), or at one step Δ p(that step's character). */
  function value(entry, step) {
    return step === null ? entry.delta : entry.delta_steps[step];
  }

  function format(number) {
    const text = Math.abs(number) < 0.005 ? "0.00" : Math.abs(number).toFixed(2);
    return `${number < 0 && text !== "0.00" ? "−" : number > 0 && text !== "0.00" ? "+" : ""}${text}`;
  }

  /** "Cross-attention, layer 2, head 3" for a head of the answer. */
  function label(entry) {
    return ITT.t("importance.head_name", {
      kind: ITT.t(`importance.kind_${entry.kind}`), layer: entry.layer + 1, head: entry.head + 1,
    });
  }

  /** The heads with the largest effects at ``step`` (null: the whole translation, as the server ranked). */
  function top(answer, step, count) {
    if (step === null) return answer.top;
    return [...answer.heads].sort((a, b) => Math.abs(value(b, step)) - Math.abs(value(a, step)))
      .slice(0, count || answer.top.length).map((entry) => entry.name);
  }

  /** Fill the grid's cells with ``answer``'s numbers for ``step``. */
  function fill(answer, step) {
    const values = answer.heads.map((entry) => value(entry, step));
    const largest = Math.max(1e-9, ...values.map(Math.abs));
    const marked = new Set(top(answer, step));
    answer.heads.forEach((entry, index) => {
      const button = document.querySelector(`.importance-grid .head-switch[data-part="${entry.name}"]`);
      if (!button) return;
      const number = values[index];
      button.style.setProperty("--strength", (Math.abs(number) / largest).toFixed(3));
      button.dataset.sign = number < 0 ? "minus" : "plus";
      button.classList.toggle("top", marked.has(entry.name));
      button.querySelector(".value").textContent = `${marked.has(entry.name) ? "★" : ""}${format(number)}`;
      const text = ITT.t("importance.cell", { name: label(entry), value: format(number) });
      button.setAttribute("aria-label", text);
      button.title = text;
    });
  }

  /** The entry of ``answer`` for a part name ("cross.1.2"). */
  function entry(answer, name) {
    return answer.heads.find((head) => head.name === name);
  }

  return { fill, format, label, top, value, entry };
})();
