"""A recipe: everything that makes a model, in one TOML file (``model/training/recipes/*.toml``).

It names the data (sources, how often each is repeated, the held-out splits), the transforms that
add pairs (``transforms.py``), the tokenizer, the model's size, the loss, the schedule and the
averaging, the seeds and the threads, and the stages when one schedule is not enough: every stage
continues from the weights the one before it ended with, on the same vocabularies. Nothing else
decides what ``python -m model.training.train RECIPE`` trains. The checkpoint keeps the recipe's
text (history.json's ``recipe``), so a model can always be made again.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path

from model.training.data import (
    CEDICT_FILE,
    OPT_IN,
    Pair,
    Splits,
    read_sources,
    source_file,
    source_names,
    split_pairs,
)
from model.training.transforms import USES_CEDICT, apply_transforms, check_transforms

RECIPES = Path(__file__).parent / "recipes"


@dataclass(frozen=True)
class Stage:
    """One schedule over the data: from random weights (the first) or the stage before's end."""

    label: dict[str, str]  # what this stage is, {"en": …, "zh": …} (the /training page)
    epochs: int
    warmup: int  # steps of linear warmup
    lr_factor: float  # the peak is lr_factor · d_model^-0.5 · warmup^-0.5
    decay: str = "linear"  # after warmup: "linear" to zero at the stage's last step, or "noam" (1/√step)
    # a linear decay ends at lr_end · peak instead of zero: one long schedule split into stages,
    # each short enough to finish (and be committed) in a sitting
    lr_end: float = 0.0
    # ship the mean of the last N epochs' weights when it scores better on dev; the stage's start
    # counts as epoch 0 (a one-epoch stage with average = 2: the mean of its end and its start)
    average: int = 1
    upsample: dict[str, int] = field(default_factory=dict)  # source → how many times it is read
    transforms: dict[str, dict] = field(default_factory=dict)  # name → settings (transforms.py)
    seed: int = 13  # shuffles, dropout and the transforms' draws
    snapshots: tuple[int, ...] = ()  # steps after which a float16 copy goes to WORK/stageN/snapshots


@dataclass(frozen=True)
class Recipe:
    name: str
    text: str  # the TOML the recipe was read from, as it was
    sources: tuple[str, ...]  # data.py's source names (tatoeba, hsk, captions, …)
    stages: tuple[Stage, ...]
    description: dict[str, str] = field(default_factory=dict)
    split_seed: int = 13  # which sentences are held out for dev and test
    test_size: int = 1000
    # the final test split: pairs of every source drawn by final_seed after every other split,
    # never trained on and never looked at while choosing stages or weights (0: none)
    final_size: int = 0
    final_seed: int = 0
    dev_size: int = 500
    english_vocab: int = 8000  # BPE pieces; the Chinese side is one token per character
    d_model: int = 256
    n_heads: int = 4
    n_layers: int = 3  # encoder layers and decoder layers each
    d_ff: int = 1024
    dropout: float = 0.1
    batch_tokens: int = 3000
    label_smoothing: float = 0.1
    unlikelihood: float = 0.0  # weight of the loss against repeating the last 4 tokens
    clip: float = 1.0
    threads: int = 2
    # "bfloat16" runs the forward pass under CPU autocast (about 1.5x faster where the CPU has
    # bfloat16 units: AMX or AVX512-BF16); the weights, the optimizer and the loss stay float32
    precision: str = "float32"
    save_every: int = 500  # steps between the resumable states written inside an epoch

    def files(self) -> list[str]:
        """The data files the recipe reads (CC-CEDICT too when a transform swaps names)."""
        files = [source_file(name) for name in self.sources]
        if CEDICT_FILE not in files and any(USES_CEDICT & set(s.transforms) for s in self.stages):
            files.append(CEDICT_FILE)
        return files

    def settings(self, stage: Stage, total_steps: int | None) -> dict:
        """A stage's settings as history.json keeps them (the keys /training, the evaluator and
        the timeline packer read)."""
        return {
            "recipe": self.name, "epochs": stage.epochs, "warmup": stage.warmup,
            "lr_factor": stage.lr_factor, "decay": stage.decay, "lr_total_steps": total_steps,
            "lr_end": stage.lr_end, "final_size": self.final_size, "final_seed": self.final_seed,
            "average": stage.average, "seed": stage.seed, "split_seed": self.split_seed,
            "test_size": self.test_size, "dev_size": self.dev_size, "sources": list(self.sources),
            "narrow": set(self.sources) <= {"tatoeba", "hsk"}, "old_data": False,
            "bible": "bible" in self.sources, "dictionary": "cedict" in self.sources,
            "upsample": stage.upsample, "transforms": stage.transforms,
            "concat": stage.transforms.get("concat", {}).get("count", 0),
            "batch_tokens": self.batch_tokens, "label_smoothing": self.label_smoothing,
            "unlikelihood": self.unlikelihood, "clip": self.clip, "dropout": self.dropout,
            "threads": self.threads, "precision": self.precision,
        }


_TOP = {"name", "description", "data", "tokenizer", "model", "train", "transforms", "stages"}
_SECTIONS = {
    "data": {"sources", "split_seed", "test_size", "dev_size", "final_size", "final_seed"},
    "tokenizer": {"english_vocab"},
    "model": {"d_model", "n_heads", "n_layers", "d_ff", "dropout"},
    "train": {"seed", "threads", "batch_tokens", "label_smoothing", "unlikelihood", "clip",
              "precision", "save_every"},
}
_STAGE = {"label", "epochs", "warmup", "lr_factor", "lr_end", "decay", "average", "upsample", "transforms",
          "seed", "snapshots"}


def _unknown(table: dict, allowed: set[str], where: str) -> None:
    extra = set(table) - allowed
    if extra:
        raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(extra))}; "
                         f"the keys are {', '.join(sorted(allowed))}")


def parse_recipe(text: str, name: str = "recipe") -> Recipe:
    """The recipe a TOML text declares; ``ValueError`` says what to fix."""
    table = tomllib.loads(text)
    _unknown(table, _TOP, name)
    for section, allowed in _SECTIONS.items():
        _unknown(table.get(section, {}), allowed, f"[{section}]")
    values = {key: value for section in _SECTIONS for key, value in table.get(section, {}).items()}
    for key, value in values.items():
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
            raise ValueError(f"{key} takes a number ≥ 0, not {value} (a negative unlikelihood "
                             "weight would reward repeating)")
    if values.get("precision", "float32") not in ("float32", "bfloat16"):
        raise ValueError("[train] precision is 'float32' or 'bfloat16'")
    seed = values.pop("seed", 13)
    sources = tuple(values.pop("sources", ("tatoeba", "hsk")))
    for source in sources:
        source_file(source)  # raises for an unknown name
    if not {"tatoeba", "hsk"} <= set(sources):
        raise ValueError("[data] sources must include tatoeba and hsk (the dev and test splits)")
    common = table.get("transforms", {})
    stages = []
    for number, raw in enumerate(table.get("stages", []), start=1):
        where = f"[[stages]] number {number}"
        _unknown(raw, _STAGE, where)
        transforms = {**common, **raw.get("transforms", {})}
        transforms = {key: value for key, value in transforms.items() if value is not False}
        try:
            check_transforms(transforms)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        unknown = set(raw.get("upsample", {})) - set(sources)
        if unknown:
            raise ValueError(f"{where}: upsample names {', '.join(sorted(unknown))}, not in [data] sources")
        if raw.get("decay", "linear") not in ("linear", "noam"):
            raise ValueError(f"{where}: decay is 'linear' or 'noam'")
        if raw.get("epochs", 0) < 1 or raw.get("warmup", 0) < 1 or raw.get("lr_factor", 0) <= 0:
            raise ValueError(f"{where}: epochs, warmup and lr_factor are required, each above 0")
        if not 0 <= raw.get("lr_end", 0.0) < 1:
            raise ValueError(f"{where}: lr_end is a share of the peak rate, from 0 to below 1")
        if not 1 <= raw.get("average", 1) <= raw["epochs"] + 1:
            raise ValueError(f"{where}: average counts epochs, the start included: 1 to epochs + 1")
        stages.append(Stage(
            label=raw.get("label", {}), epochs=raw["epochs"], warmup=raw["warmup"],
            lr_factor=float(raw["lr_factor"]), decay=raw.get("decay", "linear"),
            lr_end=float(raw.get("lr_end", 0.0)),
            average=raw.get("average", 1), upsample=raw.get("upsample", {}), transforms=transforms,
            seed=raw.get("seed", seed), snapshots=tuple(raw.get("snapshots", ()))))
    if not stages:
        raise ValueError(f"{name}: no [[stages]]: a recipe needs at least one")
    return Recipe(name=table.get("name", name), text=text, sources=sources, stages=tuple(stages),
                  description=table.get("description", {}), **values)


def load_recipe(path: Path) -> Recipe:
    """Read and check a recipe file (a bare name is looked for in model/training/recipes/)."""
    if not path.is_file() and (RECIPES / f"{path}.toml").is_file():
        path = RECIPES / f"{path}.toml"
    try:
        return parse_recipe(path.read_text(encoding="utf-8"), path.stem)
    except (OSError, tomllib.TOMLDecodeError, ValueError) as error:
        raise SystemExit(f"recipe {path}: {error}") from None


def held_out_splits(data: Path, recipe: Recipe, sources: tuple[str, ...] | None = None) -> Splits:
    """The dev and test splits (and the training split) of the recipe's sources, or of ``sources``."""
    return split_pairs(read_sources(data, list(sources or recipe.sources)), seed=recipe.split_seed,
                       n_test=recipe.test_size, n_dev=recipe.dev_size,
                       n_test_hsk=min(300, recipe.test_size), n_final=recipe.final_size,
                       final_seed=recipe.final_seed)


def stage_pairs(train: list[Pair], stage: Stage, data: Path) -> tuple[list[Pair], dict[str, int]]:
    """A stage's training pairs: the training split, each source repeated as ``upsample`` says,
    and what its transforms add (with how many each added)."""
    pairs = list(train)
    for source, times in stage.upsample.items():
        pairs += [p for p in train if p.source == source] * (int(times) - 1)
    return apply_transforms(pairs, stage.transforms, stage.seed, data)


def recipe_from_settings(settings: dict) -> Recipe:
    """The one-stage recipe an older checkpoint's history.json settings (train.py's flags before
    recipes) stand for, so the evaluator can rebuild what it trained on."""
    if "sources" in settings:
        sources = tuple(settings["sources"])
    else:  # a checkpoint from before 2026-12-01 has no "old_data": it saw none of the files added then
        sources = tuple(source_names(wide=not settings.get("narrow", True),
                                     new=settings.get("old_data") is False,
                                     bible=bool(settings.get("bible")),
                                     dictionary=bool(settings.get("dictionary"))))
    if "transforms" in settings:
        transforms, upsample = settings["transforms"], settings.get("upsample") or {}
    else:
        transforms = _flag_transforms(settings)
        upsample = {s: int(n) for s, _, n in (item.partition("=") for item in
                                               filter(None, str(settings.get("upsample") or "").split(",")))}
    seed = int(settings.get("seed", 13))
    stage = Stage(label={}, epochs=1, warmup=1, lr_factor=1.0, upsample=upsample,
                  transforms=transforms, seed=seed)
    split_seed = settings.get("split_seed", seed)
    return Recipe(name="settings", text="", sources=sources, stages=(stage,),
                  split_seed=int(split_seed), test_size=int(settings.get("test_size", 1000)),
                  dev_size=int(settings.get("dev_size", 500)),
                  final_size=int(settings.get("final_size", 0)),
                  final_seed=int(settings.get("final_seed", 0)))


def _flag_transforms(s: dict) -> dict[str, dict]:
    """train.py's old --rare-words, --vary-* … flags as transform settings."""
    t: dict[str, dict] = {}
    if s.get("rare_words"):
        max_pairs, _, copies = str(s["rare_words"]).partition(":")
        t["rare_words"] = {"max_pairs": int(max_pairs), "copies": int(copies or 1)}
    if s.get("vary_names"):
        t["names"] = {"copies": int(s["vary_names"]), "wide": bool(s.get("names_wide")),
                      "limit": int(s.get("names_limit", 20000))}
    if s.get("vary_titles"):
        t["titles"] = {"copies": int(s["vary_titles"]), "limit": int(s.get("titles_limit", 10000))}
    if s.get("vary_latin"):
        t["latin"] = {"copies": int(s["vary_latin"]), "short": float(s.get("latin_short") or 0.0)}
    if s.get("vary_acronyms"):
        t["acronyms"] = {"copies": int(s["vary_acronyms"]), "limit": int(s.get("acronyms_limit", 8000)),
                         "term_share": float(s.get("acronym_terms") or 0.0)}
    if s.get("drop_stops"):
        t["drop_stops"] = {"share": float(s["drop_stops"])}
    if s.get("vary_numbers"):
        t["numbers"] = {"copies": int(s.get("number_copies", 1)),
                        "any_length": bool(s.get("numbers_any_length"))}
    if s.get("concat"):
        t["concat"] = {"count": int(s["concat"])}
    return t


def evaluation_sources(recipe: Recipe) -> tuple[str, ...]:
    """The sources whose test splits every model is scored on: all the wider domains, plus the
    opt-in sources the recipe read (so its splits are drawn as its training drew them)."""
    opt_in = tuple(name for name in recipe.sources if name in OPT_IN)
    return tuple(source_names(wide=True, new=True)) + opt_in


def extended_from(text: str, recipe: Recipe) -> int | None:
    """How many stages the recipe ``text`` had, if ``recipe`` trains as it does with none or more
    stages added after its last one; otherwise None. Its description and the stages' labels may be
    reworded: they are words for the pages, not training. Running the longer recipe from random
    weights trains the same stages first, so a run of the shorter one may go on into the new ones."""
    before = parse_recipe(text, recipe.name)
    same = replace(before, text="", description={}, stages=()) == replace(
        recipe, text="", description={}, stages=())
    count = len(before.stages)
    if same and len(recipe.stages) >= count and _unlabelled(recipe.stages[:count]) == _unlabelled(
            before.stages):
        return count
    return None


def _unlabelled(stages: tuple[Stage, ...]) -> tuple[Stage, ...]:
    return tuple(replace(stage, label={}) for stage in stages)
