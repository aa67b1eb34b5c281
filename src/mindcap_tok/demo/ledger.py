"""A demo ledger to try the middle of the pipeline on (`score`, `sweep`, `report`, `price`, `audit`, `protocol`)
without a GPU: simulated traces written as real Qwen3 token ids for real MGSM prompts.

Emission positions and correctness come from :mod:`mindcap_tok.stats.simulation` (the model the coverage check
uses); each trace is then spelled out in tokens: reasoning (the item's own MGSM question, in the arm's reasoning
language, repeated) up to its emission position E, an answer line ``#### <n>`` ending at E (the gold answer when
correct, gold + 1 otherwise), and, for a trace that stopped, a short tail. Pieces are joined only where a
pre-token of the text ends (the reasoning before the answer line after a letter or digit, which a newline cannot
join), so every finished trace's ids are the tokenizer's own encoding of its text, as a model's usually are; the
answer line may therefore end a few tokens before E. Same seed, same records.
"""

from __future__ import annotations

import math
import os
import unicodedata
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from .._io import check_output_folder, output_folder
from ..errors import BadInputError
from ..generation import task_prompt
from ..resample import scale_budget
from ..stats.simulation import SimCell, SimDesign, SimulatedLedger, simulate
from ..store import Ledger
from ..tasks.datasets import TaskItem, load_items
from ..tasks.load import DEFAULT_TASK, load_task
from ..tasks.model import Task
from ..tokenization.load import ResolvedTokenizer, load_tokenizer
from ..tokenization.long_text import SAFE_CHARS, engine_guard
from .tiny_model import check_tiny_model

PRODUCER = "mindcap-tok demo"
MODEL = "qwen3-8b"
#: the paper's Qwen3 premiums r(m, L) for the demo's languages
PREMIUMS = {"deu_Latn": 1.56, "tha_Thai": 2.55, "swh_Latn": 1.94}
REPLAY_CAP = 4096
#: the independent ledger's caps: B and floor(r·B) for Thai at B = 256, 512 (so `confirm` and an independent
#: sweep at the paper's premium run on it), and 1024
INDEPENDENT_CAPS = tuple(sorted({256, 512, 1024, *(scale_budget(PREMIUMS["tha_Thai"], b) for b in (256, 512))}))
ANNOUNCED = (256, 1024)
_BASE = 130.0  # median emission position of an English trace, in tokens


@dataclass(frozen=True)
class DemoSummary:
    """What :func:`build_demo` wrote: the folder, its two ledgers and the facts the simulation fixed."""

    out_dir: Path
    ledger: Path
    independent: Path
    rows: int
    n_items: int
    k: int
    seed: int
    arms: tuple[str, ...]
    langs: tuple[str, ...]
    caps: tuple[int, ...]


def demo_task() -> Task:
    """The task the demo simulates (the default task, MGSM: real items and prompts)."""
    return load_task(DEFAULT_TASK)


def _demo_arms(task: Task) -> tuple[str, str, str, str]:
    """The task's native and comparator arms, then its other arm reasoning in English (MGSM's pivot) and its
    other arm reasoning in the item's language (MGSM's code-switched)."""
    others = [a for a in task.arms if a not in (task.native, task.comparator)]
    english = next(a for a in others if task.arms[a].reasoning is not None)
    local = next(a for a in others if task.arms[a].reasoning is None)
    return task.native, task.comparator, english, local


def demo_design(n_items: int = 250, k: int = 4) -> SimDesign:
    """Four arms in de/th/sw with the paper's premiums: native answers later in proportion to the premium;
    the English-reasoning arms pay a translation preamble but are more often correct; code-switched lies between."""
    native, comparator, english, local = _demo_arms(demo_task())
    cells = []
    for lang, nat_mu, tr_mu, never in (
        ("deu_Latn", 1.0, 1.4, 0.03),
        ("tha_Thai", 0.1, 1.4, 0.05),
        ("swh_Latn", -0.2, 0.3, 0.25),
    ):
        r = PREMIUMS[lang]
        cells += [
            SimCell(native, lang, nat_mu, math.log(_BASE * r), 0.45, never, 0.3, MODEL),
            SimCell(comparator, lang, tr_mu, math.log(_BASE * 1.6), 0.35, 0.03, 0.3, MODEL),
            SimCell(english, lang, (nat_mu + tr_mu) / 2, math.log(_BASE * 1.2), 0.4, 0.04, 0.3, MODEL),
            SimCell(local, lang, nat_mu, math.log(_BASE * (1 + r) / 2), 0.45, never, 0.3, MODEL),
        ]
    return SimDesign(tuple(cells), n_items=n_items, k=k, cap=REPLAY_CAP, premiums=dict(PREMIUMS))


def _cycle(ids: list[int], n: int) -> list[int]:
    """The first ``n`` ids of ``ids`` repeated."""
    return (ids * (n // len(ids) + 1))[:n] if n > 0 else []


@dataclass(frozen=True)
class _Spelling:
    """A text's own ids, to repeat and cut where one of its pre-tokens ends: ``ends`` (token counts within one
    repetition, ascending, the last being the length) and ``safe`` (those after a letter or digit, where a
    following newline stays a pre-token of its own)."""

    ids: list[int]
    ends: np.ndarray
    safe: np.ndarray

    @classmethod
    def of(cls, text: str, encoding) -> _Spelling:
        """From ``text`` and its HF ``Encoding`` (whose ``word_ids`` number the pre-tokens)."""
        words, offsets = encoding.word_ids, encoding.offsets
        ends = [j + 1 for j in range(len(words)) if j + 1 == len(words) or words[j + 1] != words[j]]
        safe = [e for e in ends if unicodedata.category(text[offsets[e - 1][1] - 1])[0] in "LN"]
        return cls(list(encoding.ids), np.array(ends, dtype=np.int64), np.array(safe, dtype=np.int64))

    def prefix(self, n: int, *, safe: bool = False) -> list[int]:
        """The longest prefix of the repeated ids, at most ``n`` long, that ends where a pre-token ends (a ``safe``
        end: one a newline may follow)."""
        points, period = (self.safe if safe else self.ends), len(self.ids)
        rounds, rest = divmod(max(n, 0), period)
        i = int(np.searchsorted(points, rest, side="right"))
        if i:
            cut = rounds * period + int(points[i - 1])
        elif rounds and points.size:
            cut = (rounds - 1) * period + int(points[-1])
        else:
            cut = 0
        return _cycle(self.ids, cut)


class _Writer:
    """Spells simulated traces as token ids, caching each item's prompt and filler encodings."""

    def __init__(self, tok: ResolvedTokenizer, data_dir: str | os.PathLike[str] | None) -> None:
        self.tok = tok
        self.task = demo_task()
        #: arms that reason in English (their filler is the English question)
        self.english = {name for name, arm in self.task.arms.items() if arm.reasoning == "eng_Latn"}
        langs = (*PREMIUMS, "eng_Latn")
        self.items: dict[str, list[TaskItem]] = {lang: load_items(self.task, lang, data_dir=data_dir) for lang in langs}
        for lang, items in self.items.items():
            # a filler is cut where its pre-tokens end, which only the library's offsets tell; a text past
            # SAFE_CHARS could exceed its regex engine's limits
            for k, it in enumerate(items):
                if len(it.fields["question"]) >= SAFE_CHARS:
                    raise BadInputError(
                        f"MGSM {lang} item {k + 1}: the question has {len(it.fields['question']):,} characters, "
                        f"more than the demo spells ({SAFE_CHARS - 1:,} at most)"
                    )
        self.filler = {
            lang: self._spell([it.fields["question"] + "\n" for it in items]) for lang, items in self.items.items()
        }
        # no final full stop: "above" + "\nThe" repeats as it encodes (a "." would join the newline)
        (self.tail,) = self._spell(["\nThe answer is given above"])

    def _spell(self, texts: list[str]) -> list[_Spelling]:
        hf = self.tok.tokenizer  # the demo's tokenizer is Qwen3's: an HF tokenizer
        encodings = engine_guard(
            lambda: hf.encode_batch(texts, add_special_tokens=False),  # type: ignore[union-attr]  # HF: see above
            texts,
        )
        return [_Spelling.of(t, e) for t, e in zip(texts, encodings, strict=True)]

    def trace(
        self, arm: str, lang: str, item: int, emission: float, correct: bool, n_tokens: int, stopped: bool
    ) -> list[int]:
        """Ids whose answer line ends at token ``emission`` or a few tokens before (NaN: no answer line), at most
        ``n_tokens`` long; a trace that did not stop is exactly ``n_tokens`` long (the cap cuts it anywhere)."""
        filler = self.filler["eng_Latn" if arm in self.english else lang][item]
        if math.isnan(emission):
            return filler.prefix(n_tokens) if stopped else _cycle(filler.ids, n_tokens)
        gold = int(self.items[lang][item].gold)
        answer = self.tok.encode(f"\n#### {gold if correct else gold + 1}")
        head = filler.prefix(int(emission) - len(answer), safe=True) + answer
        rest = n_tokens - len(head)
        return head + (self.tail.prefix(rest) if stopped else _cycle(self.tail.ids, rest))

    def records(self, sim: SimulatedLedger, design: str, seed: int, announced: int | None = None) -> list[dict]:
        """One ledger record per simulated trace of ``sim``."""
        out: list[dict[str, Any]] = []
        for c_i, cell in enumerate(sim.design.cells):
            for item in range(sim.design.n_items):
                prompt = task_prompt(self.task, self.items[cell.lang][item], arm=cell.arm, announced=announced)
                prompt_ids = self.tok.encode(prompt.text)
                for cap_i, cap in enumerate(sim.caps):
                    for sample in range(sim.design.k):
                        at = (cap_i, c_i, item, sample)
                        ids = self.trace(
                            cell.arm,
                            cell.lang,
                            item,
                            sim.emission[at],
                            bool(sim.correct[at]),
                            int(sim.n_tokens[at]),
                            bool(sim.stopped[at]),
                        )
                        out.append(
                            {
                                "model": MODEL,
                                "arm": cell.arm,
                                "lang": cell.lang,
                                "item": item,
                                "sample": sample,
                                "seed": seed + sample,
                                "cap": cap,
                                "announced": announced,
                                "announce_style": prompt.announce_style,
                                "design": design,
                                "template_id": prompt.template_id,
                                "prompt": prompt.text,
                                "prompt_ids": prompt_ids,
                                "output_ids": ids[:cap],
                                "finish_reason": "stop" if sim.stopped[at] else "length",
                                "gold": self.items[cell.lang][item].gold,
                                "generator": "simulated",
                                "tokenizer": MODEL,
                            }
                        )
        texts = self.tok.decode_batch([r["output_ids"] for r in out], skip_special_tokens=True)
        for rec, text in zip(out, texts, strict=True):
            rec["text"] = text
        return out


def _subset(design: SimDesign, arms: tuple[str, ...], langs: tuple[str, ...]) -> SimDesign:
    return replace(design, cells=tuple(c for c in design.cells if c.arm in arms and c.lang in langs))


def _announced(design: SimDesign, budget: int) -> SimDesign:
    """Native Thai told its budget: a tight announcement shortens the traces (answers come earlier)."""
    native = demo_task().native
    cell = next(c for c in design.cells if c.arm == native and c.lang == "tha_Thai")
    shift = math.log(min(1.0, budget / 1024) ** 0.4)
    return replace(design, cells=(replace(cell, emission_mu=cell.emission_mu + shift),))


def demo_records(
    tok: ResolvedTokenizer, seed: int = 0, *, n_items: int = 250, k: int = 4, data_dir=None
) -> dict[str, list[dict]]:
    """The records of the demo's two ledgers: ``ledger`` (replay: 4 arms x 3 languages at cap 4096, and native
    Thai announced at 256 and 1024 tokens) and ``independent`` (native and translate-act Thai, one decode per cap
    :data:`INDEPENDENT_CAPS`: a separate ledger, since a replay comparison refuses a cell that mixes caps)."""
    design = demo_design(n_items, k)
    writer = _Writer(tok, data_dir)
    seeds = np.random.default_rng(seed).integers(0, 2**31 - 1, size=2 + len(ANNOUNCED)).tolist()
    replay = writer.records(simulate(design, seeds[0]), "replay", seed)
    for budget, s in zip(ANNOUNCED, seeds[2:], strict=True):
        replay += writer.records(simulate(_announced(design, budget), s), "announcement", seed, budget)
    task = demo_task()
    thai = _subset(design, (task.native, task.comparator), ("tha_Thai",))
    return {
        "ledger": replay,
        "independent": writer.records(simulate(thai, seeds[1], caps=INDEPENDENT_CAPS), "independent", seed),
    }


README = """# A simulated demo ledger

Built by `mindcap-tok demo --seed {seed}` (mindcap_tok.demo.ledger). **Nothing here was generated by a model.**

Two ledgers of model `{model}` ({rows} records): real MGSM items and prompts (prompt version {version}), token
ids of the real Qwen3 tokenizer, {n_items} items x {k} samples per cell.

- `ledger/`: design `replay` (arms {arms} in {langs}, cap {cap}) and design `announcement` (native Thai, the
  budget announced at {announced} tokens, cap {cap}).
- `independent/`: design `independent` (native and translate-act Thai, one decode per cap {caps}); a ledger of
  its own because a replay comparison refuses a cell that mixes caps (`sweep --frame independent` reads it).
- How: for each trace, an answer-emission position E and a correctness C are drawn from the model in
  mindcap_tok.stats.simulation (item random effects shared by every cell, log-normal E whose median scales
  with the paper's premiums {premiums}, C correlated with E, some traces never answering). The trace is then
  spelled out in tokens: the item's question repeated as "reasoning", an answer line `#### n` ending at token E
  or a few tokens before (gold when C = 1, gold + 1 otherwise), and for a trace that stopped, a short tail. The
  pieces join where the text's pre-tokens end, so a finished trace's ids are the tokenizer's own encoding of
  its text.
- The same seed gives the same records.

Try: `mindcap-tok score --ledger ledger`, `mindcap-tok sweep --ledger ledger --premiums qwen3-8b`,
`mindcap-tok report --ledger ledger --out-dir report/`,
`mindcap-tok sweep --ledger independent --frame independent --budgets 256,512 --premiums th=2`.
"""


def check_demo_outputs(out_dir: str | os.PathLike[str] | None, tiny_model: str | os.PathLike[str] | None) -> None:
    """Check every output folder of ``mindcap-tok demo`` before anything is written: the demo folder and the tiny
    model's each hold nothing but their own earlier output, neither lies in the other, and the tiny model can be
    built (torch installed); so a refusal never comes after one of them was written."""
    if out_dir is not None:
        check_output_folder(out_dir, PRODUCER)
    if tiny_model is not None:
        check_tiny_model(tiny_model)
    if out_dir is not None and tiny_model is not None:
        a, b = Path(os.path.abspath(out_dir)), Path(os.path.abspath(tiny_model))
        if a == b or a in b.parents or b in a.parents:
            raise BadInputError(f"--out-dir {out_dir} and --tiny-model {tiny_model} overlap; give two separate folders")


def build_demo(
    out_dir: str | os.PathLike[str],
    seed: int = 0,
    *,
    n_items: int = 250,
    k: int = 4,
    tokenizer: ResolvedTokenizer | None = None,
    data_dir=None,
    tokenizers_dir: str | os.PathLike[str] | None = None,
) -> DemoSummary:
    """Write ``out_dir`` (``ledger/``, ``independent/`` and ``README.md``) atomically: nothing is left behind on
    an error, and a rerun replaces an earlier demo."""
    tok = tokenizer or load_tokenizer(MODEL, tokenizers_dir)
    task = demo_task()
    records = demo_records(tok, seed, n_items=n_items, k=k, data_dir=data_dir)
    target = Path(out_dir)
    rows = sum(len(r) for r in records.values())
    with output_folder(target, PRODUCER) as tmp:
        for name, part in records.items():
            Ledger(tmp / name).append(part, {MODEL: tok})
        text = README.format(
            seed=seed,
            rows=rows,
            model=MODEL,
            n_items=n_items,
            k=k,
            arms=", ".join(task.arms),
            version=task.template_version,
            langs=", ".join(PREMIUMS),
            cap=REPLAY_CAP,
            caps=", ".join(map(str, INDEPENDENT_CAPS)),
            announced=" and ".join(map(str, ANNOUNCED)),
            premiums=", ".join(f"{lang} {r}" for lang, r in PREMIUMS.items()),
        )
        (tmp / "README.md").write_text(text, "utf-8")
    return DemoSummary(
        target,
        target / "ledger",
        target / "independent",
        rows,
        n_items,
        k,
        seed,
        tuple(task.arms),
        tuple(PREMIUMS),
        (REPLAY_CAP, *INDEPENDENT_CAPS),
    )
