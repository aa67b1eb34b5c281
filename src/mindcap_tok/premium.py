"""Token premiums r(m, L) on FLORES-200 (or parallel MGSM texts) with paired percentile bootstrap CIs.

r(m, L) = total tokens of L / total tokens of the parallel reference (English), with model m's own
tokenizer (any family: ``tokenizers``, ``tiktoken``, ``sentencepiece``), over every sentence pair of a split,
after NFC, without special tokens (paper §3). Per-sentence counts are kept apart from the ratio so the
bootstrap only re-weights sums (as sacrebleu keeps per-segment statistics): one resampling matrix serves
every language. ``split="dev+devtest"`` pools both splits (997 + 1012 = 2009 pairs).

``protocol="petrov2023"`` reproduces Petrov et al. (NeurIPS 2023, "Language Model Tokenizers Introduce
Unfairness Between Languages"): per language ONE string is encoded, the lines of each split file joined
with single spaces, premium = tokens(L) / tokens(ref). Their code reads each file with
``read().split("\n")``, which keeps one empty string after each file's final newline; joining
``dev + devtest`` then gives a double space between the two files and a trailing space. Those two
spaces are the "extra one or two tokens" in their totals (1 or 2 depending on the tokenizer and on the
text next to them, so not a constant per tokenizer). Their text is also NOT NFC-normalised: this protocol
reads the files as they are (tokenizers that normalise, like Qwen's NFC, still do so themselves). Both
together reproduce their ``Qwen``, ``cl100k_base`` and ``LLAMA`` token counts exactly, for all 204
languages (``scripts/compare_petrov2023.py``); with NFC applied first, cl100k_base and LLAMA differ on
about 34 languages, by up to 3.4% (kas_Deva).
One string has no resampling units, so that protocol reports ``ci_low = ci_high = None`` (JSON ``null``)
and ``n_boot = 0``; ``n_pairs`` is the number of sentence pairs joined.

Counting engine: each family's own library, except that a byte-level BPE ``tokenizer.json`` which tiktoken runs
exactly (Qwen3, Llama 3.1, Mistral NeMo, Whisper: :func:`mindcap_tok.tokenization.tiktoken_engine.tiktoken_engine`) is
counted by tiktoken when there is enough text for its faster encoding to repay building it. ``engine`` in each
result names the library that ran; ``engine="reference"`` forces the family's own.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction

import numpy as np
from tokenizers import Tokenizer

from .choices import DEFAULT_LANGS as DEFAULT_LANGS
from .choices import PREMIUM_SPLITS as PREMIUM_SPLITS
from .choices import PROTOCOLS as PROTOCOLS
from .data.flores import flores_file, flores_source, load_parallel
from .data.languages import resolve_language
from .errors import BadInputError
from .resample import DEFAULT_RESAMPLING, Resampling, bootstrap_sums, scale_budget
from .tasks.mgsm import MGSM_CORPORA, mgsm_source, mgsm_texts
from .tokenization.hf import encode_texts
from .tokenization.load import ResolvedTokenizer
from .tokenization.tiktoken_engine import Counter

ENGINES = ("auto", "reference")
#: characters of text from which ``engine="auto"`` counts a byte-level tokenizer.json with tiktoken (about 30
#: FLORES languages): building the engine, checks included, costs what tiktoken saves on 2.8 M (Qwen3) to 7.4 M
#: (Llama 3.1) characters (bench_premium.py, README "Performance")
TIKTOKEN_ENGINE_MIN_CHARS = 4_000_000


@dataclass(frozen=True)
class Premium:
    """One (model, language) premium with its bootstrap interval and everything needed to redo it."""

    model: str
    lang: str
    ref: str
    split: str
    premium: float
    ci_low: float | None
    ci_high: float | None
    ci: float
    tokens: int
    ref_tokens: int
    n_pairs: int
    n_boot: int
    seed: int
    tokenizer_sha256: str
    engine: str
    scaled_budgets: dict[int, int] | None = field(default=None)
    protocol: str = "per-sentence"

    @property
    def ratio(self) -> Fraction:
        """The premium as an exact fraction of the two totals."""
        return Fraction(self.tokens, self.ref_tokens)

    def as_dict(self) -> dict:
        """Plain data (JSON-ready; budgets become string keys in JSON), ``protocol`` included for every row."""
        return asdict(self)


def count_tokens(tokenizer: Tokenizer | ResolvedTokenizer, lines: Sequence[str]) -> np.ndarray:
    """Token count of each line, no special tokens (one batched call); any tokenizer family."""
    if isinstance(tokenizer, ResolvedTokenizer):
        return tokenizer.count_tokens(lines)
    return np.fromiter(map(len, encode_texts(tokenizer, lines)), dtype=np.int64, count=len(lines))


def ratio_bootstrap(
    counts: np.ndarray, ref_counts: np.ndarray, *, resampling: Resampling
) -> tuple[np.ndarray, np.ndarray]:
    """Paired percentile CIs of sum(counts[:, j]) / sum(ref_counts) for every column j.

    ``counts`` is (n_pairs, n_langs); returns (low, high) arrays of length n_langs.
    """
    sums = bootstrap_sums(
        np.column_stack([ref_counts, counts]).astype(np.float64), resampling.n_boot, seed=resampling.seed
    )
    ratios = sums[:, 1:] / sums[:, :1]
    alpha = 1.0 - resampling.level
    low, high = np.quantile(ratios, [alpha / 2, 1 - alpha / 2], axis=0, overwrite_input=True)
    return low, high


def load_split(
    codes: Sequence[str], split: str, *, source: str, ref: str, nfc: bool = True
) -> dict[str, list[list[str]]]:
    """Line-aligned sentences per language, one list per split file (``dev+devtest``: two lists).

    ``split`` may also name a parallel MGSM corpus (:data:`~mindcap_tok.tasks.mgsm.MGSM_CORPORA`: ``mgsm``, the
    questions; ``mgsm-answers``, the exemplar answers), read from the MGSM folder ``source``."""
    if split in MGSM_CORPORA:
        norm = (lambda s: unicodedata.normalize("NFC", s)) if nfc else str
        return {
            code: [[norm(t) for t in mgsm_texts(code, split, folder=source)]] for code in dict.fromkeys([ref, *codes])
        }
    if split not in PREMIUM_SPLITS:
        raise BadInputError(f"unknown split {split!r}; use one of {', '.join(PREMIUM_SPLITS)}")
    parts = [load_parallel(codes, split=part, source=source, ref=ref, nfc=nfc) for part in split.split("+")]
    return {code: [part[code] for part in parts] for code in parts[0]}


def petrov2023_string(files: Sequence[Sequence[str]]) -> str:
    """Petrov et al.'s one string: ``" ".join`` of every file's ``read().split("\n")``.

    Each FLORES file ends with a newline, so each contributes its lines plus one empty string.
    """
    return " ".join(item for lines in files for item in (*lines, ""))


def counting_engine(tokenizer: ResolvedTokenizer, engine: str = "auto", *, texts: Iterable[str] = ()) -> Counter:
    """What counts the tokens: the family's own back end, or (``auto``, ``texts`` of at least
    :data:`TIKTOKEN_ENGINE_MIN_CHARS` characters) tiktoken for a ``tokenizer.json`` it runs exactly.

    ``.family`` of the result names the library.
    """
    if engine not in ENGINES:
        raise BadInputError(f"unknown counting engine {engine!r}; use one of {', '.join(ENGINES)}")
    if engine == "auto" and sum(map(len, texts)) >= TIKTOKEN_ENGINE_MIN_CHARS and tokenizer.tiktoken_engine is not None:
        return tokenizer.tiktoken_engine
    return tokenizer.backend


#: languages whose lines are counted in one batched call
LANGS_PER_CALL = 16


@dataclass(frozen=True)
class PremiumText:
    """Which parallel text a premium counts: ``split`` (FLORES ``dev``, ``devtest`` or ``dev+devtest``, pooled; or
    a parallel MGSM corpus, ``mgsm``: the 250 questions, ``mgsm-answers``: the 8 exemplar answers, with ``source``
    naming the MGSM folder) against ``ref``, per sentence or by ``protocol="petrov2023"`` (one joined string per
    language, see the module docstring; no CI); ``nfc`` NFC-normalises first (default: on, except for
    ``petrov2023``, raw text)."""

    split: str = "devtest"
    ref: str = "eng_Latn"
    protocol: str = "per-sentence"
    nfc: bool | None = None


def token_premium(
    tokenizer: ResolvedTokenizer,
    languages: Iterable[str] = DEFAULT_LANGS,
    *,
    source: str | None = None,
    text: PremiumText = PremiumText(),
    resampling: Resampling = DEFAULT_RESAMPLING,
    budgets: Sequence[int] | None = None,
    engine: str = "auto",
    on_progress: Callable[[int, int], None] | None = None,
) -> list[Premium]:
    """Premium of each language against ``text.ref`` over a FLORES split in ``source``, with paired bootstrap CIs.

    ``text`` says which text and how (:class:`PremiumText`). ``budgets`` adds floor(r·B) for each B.
    ``resampling`` gives the CI (its ``n_boot`` resamples at ``level``, at least
    :func:`~mindcap_tok.resample.min_resamples` of it: 40 at 0.95); ``n_boot=0`` gives the premium alone
    (``ci_low = ci_high = None``, as ``petrov2023``). ``on_progress(done, total)`` is called per language.
    ``engine="reference"`` counts with the tokenizer family's own library even where tiktoken runs a
    ``tokenizer.json`` exactly and faster (module docstring).
    """
    split, ref, protocol, nfc = text.split, text.ref, text.protocol, text.nfc
    n_boot, seed, ci = resampling.n_boot, resampling.seed, resampling.level
    if protocol not in PROTOCOLS:
        raise BadInputError(f"unknown premium protocol {protocol!r}; use one of {', '.join(PROTOCOLS)}")
    codes = list(dict.fromkeys(resolve_language(lang) for lang in languages))
    ref_code = resolve_language(ref)
    source = source or (str(mgsm_source()) if split in MGSM_CORPORA else flores_source())
    files = load_split(codes, split, source=source, ref=ref_code, nfc=protocol != "petrov2023" if nfc is None else nfc)
    if protocol == "petrov2023":
        texts = {code: [petrov2023_string(parts)] for code, parts in files.items()}
    else:
        texts = {code: [s for part in parts for s in part] for code, parts in files.items()}
    n_pairs = sum(len(part) for part in files[ref_code])
    counter = counting_engine(tokenizer, engine, texts=(s for lines in texts.values() for s in lines))
    ref_counts = counter.count_tokens(texts[ref_code])
    if not ref_counts.sum():  # the premium divides by it
        parts = split.split("+")
        where = (
            split if split in MGSM_CORPORA else " + ".join(flores_file(source, ref_code, split=part) for part in parts)
        )
        raise BadInputError(f"{where} has no tokens with {tokenizer.name}'s tokenizer")
    columns = []
    # a few languages per batched call: one call per language costs each library its per-call set-up (tiktoken
    # starts a thread pool per call) 204 times over; the counts are per line, so the split is exact
    for start in range(0, len(codes), LANGS_PER_CALL):
        chunk = codes[start : start + LANGS_PER_CALL]
        joined = counter.count_tokens([line for code in chunk for line in texts[code]])
        columns += np.split(joined, np.cumsum([len(texts[code]) for code in chunk])[:-1])
        if on_progress:
            on_progress(start + len(chunk), len(codes))
    counts = np.column_stack(columns)
    low: list[None] | np.ndarray
    high: list[None] | np.ndarray
    if protocol == "petrov2023" or not n_boot:
        low = high = [None] * len(codes)
        n_boot = 0
    else:
        low, high = ratio_bootstrap(counts, ref_counts, resampling=resampling)
    ref_total = int(ref_counts.sum())
    results = []
    for j, code in enumerate(codes):
        total = int(counts[:, j].sum())
        ratio = Fraction(total, ref_total)
        results.append(
            Premium(
                model=tokenizer.name,
                lang=code,
                ref=ref_code,
                split=split,
                premium=total / ref_total,
                ci_low=None if (lo := low[j]) is None else float(lo),
                ci_high=None if (hi := high[j]) is None else float(hi),
                ci=ci,
                tokens=total,
                ref_tokens=ref_total,
                n_pairs=n_pairs,
                n_boot=n_boot,
                seed=seed,
                tokenizer_sha256=tokenizer.sha256,
                engine=counter.family,
                scaled_budgets={b: scale_budget(ratio, b) for b in budgets} if budgets else None,
                protocol=protocol,
            )
        )
    return results
