/* Beam search's ranking, redone in the browser for the lineage tree: pure functions, no page
   access (tests/e2e/test_xray_formulas.py imports this file in node and holds it equal to the
   Python). */

/** GNMT's length penalty ((5 + L) / 6)^α, the divisor beam search ranks hypotheses by.
    A copy of model.decoding.length_penalty (model/decoding.py), which the search divides by.
    α is the view header's length_penalty: the trace's own (model.decoding.LENGTH_PENALTY unless
    another was asked for); no default is written here. */
export function lengthPenalty(length, alpha) {
  return ((5 + length) / 6) ** alpha;
}

/** Python's round(x, 4) for sorting: the two agree except exactly half-way, where no score lands. */
const round4 = (x) => Number(x.toFixed(4));

/** Every ended hypothesis with its length-penalised score, best first: the rule of
    app/pages/decode.py's beam_lineage. Hypotheses that reached <eos> are ranked; when none did
    (max_len stopped the search), the ones still open at the last step, and the chosen one, are.
    nodes: the trace's beam nodes ({id, parent, step, token, score, finished, selected}, id = index,
    the root 0). Returns [{node, tokens, length, penalty, score}], score = log p / penalty. */
export function beamHypotheses(nodes, alpha) {
  const children = new Map();
  for (const node of nodes) if (node.parent >= 0) children.set(node.parent, (children.get(node.parent) || 0) + 1);
  const lastStep = Math.max(...nodes.map((n) => n.step));
  let ended = nodes.filter((n) => n.finished);
  if (!ended.length) {
    ended = nodes.filter((n) => n.parent >= 0 && !children.has(n.id)
      && (n.selected || (!n.finished && n.step === lastStep)));
  }
  const hypotheses = ended.map((node) => {
    const length = node.finished ? node.step - 1 : node.step; // <eos> is not counted
    const path = [];
    for (let cursor = node.id; cursor > 0; cursor = nodes[cursor].parent) path.push(nodes[cursor].token);
    const tokens = path.reverse().filter((token) => token !== "<eos>");
    const penalty = lengthPenalty(length, alpha);
    return { node, tokens, length, penalty, score: node.score / penalty };
  });
  return hypotheses.sort((a, b) => round4(b.score) - round4(a.score)); // stable, as Python's sort
}
