"""Which encoder heads link a pronoun to the noun it refers to — measured, not asserted.

From the pronoun's row of every encoder self-attention head, read the weight that lands on the
referent's sub-word pieces, and rank the heads by it. A uniform head would give the referent
(its pieces ÷ sentence length); the ranking shows how far each real head is from that.
Pure Python over a trace's plain data.
"""

from __future__ import annotations

from dataclasses import dataclass

CONTINUATION = "##"
SPECIALS = {"<pad>", "<bos>", "<eos>", "<unk>"}


class WordNotFound(ValueError):
    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class Example:
    text: str
    pronoun: str
    referent: str
    distractor: str  # another noun the pronoun could, but does not, refer to


EXAMPLES = [
    Example("The woman said that she was tired.", "she", "woman", ""),
    Example("The teacher praised the student because he worked hard.", "he", "student",
            "teacher"),
    Example("My sister bought a new car and she loves it.", "she", "sister", "car"),
    Example("The boy kicked the ball and he laughed.", "he", "boy", "ball"),
    Example("The girl wrote code until midnight because she loves programming.", "she", "girl",
            "code"),
]


def words(tokens: list[str]) -> list[tuple[str, list[int]]]:
    """Sub-word pieces grouped into words: ``["wom", "##an"]`` → ``("woman", [i, i+1])``."""
    grouped: list[tuple[str, list[int]]] = []
    for index, token in enumerate(tokens):
        if token.startswith(CONTINUATION) and grouped:
            word, positions = grouped[-1]
            grouped[-1] = (word + token[len(CONTINUATION):], [*positions, index])
        elif token not in SPECIALS or token == "<unk>":
            grouped.append((token, [index]))
    return grouped


def locate(pieces: list[str], tokens: list[str], field: str, after: int = -1) -> list[int]:
    """Positions of the word whose pieces are ``pieces`` (as the tokenizer splits it alone);
    the first occurrence after ``after`` if there is one, else the first."""
    if not pieces:
        raise WordNotFound(field, f"{field} must be a word")
    n = len(pieces)
    starts = [i for i in range(len(tokens) - n + 1) if tokens[i : i + n] == pieces
              and (i + n == len(tokens) or not tokens[i + n].startswith(CONTINUATION))]
    if not starts:
        raise WordNotFound(field, f"{field} {''.join(pieces)!r} is not a word of the sentence")
    later = [i for i in starts if i > after]
    start = later[0] if later else starts[0]
    return list(range(start, start + n))


def rank_heads(
    encoder_attention: list[list[list[list[float]]]],  # [layer][head][query][key]
    tokens: list[str],
    pronoun: list[int],
    referent: list[int],
    distractor: list[int] | None = None,
) -> dict:
    """Every (layer, head): the pronoun row's weight on the referent, ranked from most to least."""
    grouped = words(tokens)
    length = len(tokens)
    heads = []
    grid = []
    for layer, layer_heads in enumerate(encoder_attention):
        grid_row = []
        for head, matrix in enumerate(layer_heads):
            row = [sum(matrix[q][k] for q in pronoun) / len(pronoun) for k in range(length)]
            weight = sum(row[k] for k in referent)
            per_word = sorted(
                ((sum(row[k] for k in positions), word, positions) for word, positions in grouped),
                key=lambda item: -item[0],
            )
            # 1 = the referent gets more weight than any other word of the sentence
            rank = 1 + sum(1 for w, _, positions in per_word
                           if w > weight and not set(positions) & set(referent))
            heads.append({
                "layer": layer,
                "head": head,
                "weight": round(weight, 5),
                "distractor_weight": round(sum(row[k] for k in distractor), 5)
                if distractor else None,
                "referent_rank": rank,
                "top_word": per_word[0][1],
                "top_weight": round(per_word[0][0], 5),
                "row": [round(v, 5) for v in row],
            })
            grid_row.append(round(weight, 5))
        grid.append(grid_row)
    ranking = sorted(heads, key=lambda h: -h["weight"])
    return {
        "ranking": ranking,
        "grid": grid,
        "uniform": round(len(referent) / length, 5),
        "words": len(grouped),
    }
