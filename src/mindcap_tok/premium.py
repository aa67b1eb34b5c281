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
from importlib import resources
from itertools import chain
from statistics import NormalDist
from typing import Any, NamedTuple

import numpy as np
from tokenizers import Tokenizer

from .choices import DEFAULT_LANGS as DEFAULT_LANGS
from .choices import PREMIUM_SPLITS as PREMIUM_SPLITS
from .choices import PROTOCOLS as PROTOCOLS
from .data.flores import flores_file, flores_source, load_parallel
from .data.languages import resolve_language
from .distinct import DistinctBootstrap, Occurrences, occurrences
from .errors import BadInputError
from .resample import DEFAULT_RESAMPLING, Resampling, bootstrap_sums, scale_budget
from .tasks.mgsm import MGSM_CORPORA, mgsm_source, mgsm_texts
from .tokenization.classes import BYTE_FALLBACK, UNKNOWN
from .tokenization.hf import encode_texts
from .tokenization.load import ResolvedTokenizer
from .tokenization.tiktoken_engine import Counter

ENGINES = ("auto", "reference")
#: characters of text from which ``engine="auto"`` counts a byte-level tokenizer.json with tiktoken (about 30
#: FLORES languages): building the engine, checks included, costs what tiktoken saves on 2.8 M (Qwen3) to 7.4 M
#: (Llama 3.1) characters (bench_premium.py, README "Performance")
TIKTOKEN_ENGINE_MIN_CHARS = 4_000_000


#: the diagnostics with a bootstrap CI: each is a ratio of two per-sentence sums (:class:`Diagnostics`)
RATIO_DIAGNOSTICS = (
    "tokens_per_byte",
    "tokens_per_char",
    "ref_tokens_per_byte",
    "ref_tokens_per_char",
    "byte_fallback_share",
    "unknown_char_share",
)
#: Petrov et al.'s validated filter: a (tokenizer, language) pair with more than this share of unknown tokens is blanked
PETROV_UNKNOWN_LIMIT = 0.1


@dataclass(frozen=True)
class Diagnostics:
    """What else one encode pass tells about a (model, language) premium, counted in the same pass.

    ``tokens_per_byte`` / ``tokens_per_char``: tokens over the UTF-8 bytes / characters of the language's text
    (``ref_...``: of the reference's); ``byte_fallback_share``: byte-fallback tokens over tokens (the family's
    definition: :mod:`mindcap_tok.tokenization.classes`); ``unknown_char_share``: characters the unknown token stands
    for over characters; ``unknown_token_share``: unknown tokens over tokens (Petrov et al.'s "unknown fraction");
    ``distinct_tokens``: distinct ids in the language's tokens. Each ratio has a percentile CI (``_low``, ``_high``)
    from the premium's own resamples, the distinct count a normal bootstrap interval from them
    (:func:`distinct_interval`; the resampled counts: :mod:`mindcap_tok.distinct`); ``None`` where the premium has
    none.
    ``petrov_blank``: with ``protocol="petrov2023"``, whether Petrov et al.'s validated table blanks the pair.
    """

    bytes: int
    chars: int
    ref_bytes: int
    ref_chars: int
    ref_words: int
    byte_fallback_tokens: int
    unknown_tokens: int
    unknown_chars: int
    distinct_tokens: int
    distinct_tokens_low: float | None
    distinct_tokens_high: float | None
    tokens_per_byte: float
    tokens_per_byte_low: float | None
    tokens_per_byte_high: float | None
    tokens_per_char: float
    tokens_per_char_low: float | None
    tokens_per_char_high: float | None
    ref_tokens_per_byte: float
    ref_tokens_per_byte_low: float | None
    ref_tokens_per_byte_high: float | None
    ref_tokens_per_char: float
    ref_tokens_per_char_low: float | None
    ref_tokens_per_char_high: float | None
    byte_fallback_share: float
    byte_fallback_share_low: float | None
    byte_fallback_share_high: float | None
    unknown_char_share: float
    unknown_char_share_low: float | None
    unknown_char_share_high: float | None
    unknown_token_share: float
    petrov_blank: bool | None


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
    diagnostics: Diagnostics | None = field(default=None)

    def as_dict(self) -> dict:
        """Plain data (JSON-ready; budgets become string keys in JSON), ``protocol`` included for every row; the
        :class:`Diagnostics` fields follow, flat."""
        row = asdict(self)
        row.update(row.pop("diagnostics") or {})
        return row

    @property
    def ratio(self) -> Fraction:
        """The premium as an exact fraction of the two totals."""
        return Fraction(self.tokens, self.ref_tokens)


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
        np.column_stack([ref_counts, counts]).astype(np.int64), resampling.n_boot, seed=resampling.seed
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


class _Counting(NamedTuple):
    """What :func:`premium_study` and :func:`token_premium` count over and how, as they were given."""

    source: str | None
    text: PremiumText
    resampling: Resampling
    budgets: Sequence[int] | None
    engine: str


@dataclass(frozen=True)
class PremiumStudy:
    """Premiums of one tokenizer with what the same resamples say across languages.

    ``rows``: one :class:`Premium` per language; ``fairness``: the Gini coefficients of the premiums and of tokens per
    byte across the languages (:func:`gini`), with CIs; ``groups``: mean premium and byte-fallback share per script
    (the FLORES code's suffix) and per resource class (:func:`resource_classes`), with CIs. Plain dicts.
    """

    rows: list[Premium]
    fairness: list[dict]
    groups: list[dict]


def gini(values: np.ndarray) -> np.ndarray:
    """Gini coefficient of each row of ``values`` (or of a 1-D array): sum_ij |x_i - x_j| / (2 n^2 mean).

    TokEval's (tokenizer-analysis-suite) Tokenizer Fairness Gini, TFG = sum_i sum_j |c_i - c_j| / (2 n^2 mu), there
    of c = tokens per byte; computed from the sorted values as 2 sum_i i x_(i) / (n sum x) - (n + 1) / n.
    0: every language costs the same.
    """
    x = np.sort(np.asarray(values, dtype=np.float64), axis=-1)
    n = x.shape[-1]
    ranks = np.arange(1, n + 1, dtype=np.float64)
    return 2 * (x @ ranks) / (n * x.sum(axis=-1)) - (n + 1) / n


def resource_classes() -> dict[str, int]:
    """FLORES code -> resource class (0-5) of Joshi et al. (2020), for the languages their Table 1 names
    (``resources/joshi2020_classes.tsv``)."""
    text = resources.files("mindcap_tok.resources").joinpath("joshi2020_classes.tsv").read_text("utf-8")
    lines = [line.split("\t") for line in text.splitlines() if line and not line.startswith("#")]
    return {code: int(cls) for code, cls in lines[1:]}


def script_of(code: str) -> str:
    """The script of a FLORES code: its suffix (``tha_Thai`` -> ``Thai``)."""
    return code.rpartition("_")[2]


@dataclass(frozen=True)
class _SentenceStats:
    """Per-sentence counts of one language's text (kept apart so that the bootstrap only re-weights sums)."""

    tokens: np.ndarray
    bytes: np.ndarray
    chars: np.ndarray
    fallback: np.ndarray
    unknown: np.ndarray
    unknown_chars: np.ndarray
    occurrences: Occurrences


def _sentence_stats(
    tokenizer: ResolvedTokenizer, ids: Sequence[Sequence[int]], lines: Sequence[str], classes: np.ndarray
) -> _SentenceStats:
    n = len(ids)
    lens = np.fromiter(map(len, ids), dtype=np.int64, count=n)
    flat = np.fromiter(chain.from_iterable(ids), dtype=np.int64, count=int(lens.sum()))
    kinds = classes[flat]
    owner = np.repeat(np.arange(n), lens)
    fallback = np.bincount(owner[kinds == BYTE_FALLBACK], minlength=n)
    unknown = np.bincount(owner[kinds == UNKNOWN], minlength=n)
    unknown_chars = np.zeros(n, dtype=np.int64)
    if unknown.any():  # offsets only for the sentences that hold an unknown token
        where = np.flatnonzero(unknown)
        unknown_chars[where] = tokenizer.unknown_characters([lines[int(i)] for i in where])
    return _SentenceStats(
        tokens=lens,
        bytes=np.fromiter((len(t.encode("utf-8")) for t in lines), dtype=np.int64, count=n),
        chars=np.fromiter(map(len, lines), dtype=np.int64, count=n),
        fallback=fallback,
        unknown=unknown,
        unknown_chars=unknown_chars,
        occurrences=occurrences(flat, owner, n_units=n),
    )


@dataclass(frozen=True)
class _Boot:
    """Percentile ends per statistic and language (``None``: no resamples), and the resampled values that the
    across-language statistics need."""

    level: float = 0.95
    ends: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    draws: dict[str, np.ndarray] = field(default_factory=dict)

    def low(self, name: str, j: int) -> float | None:
        return _number(self.ends[name][0][j]) if self.ends else None

    def high(self, name: str, j: int) -> float | None:
        return _number(self.ends[name][1][j]) if self.ends else None

    def interval(self, draws: np.ndarray) -> tuple[float | None, float | None]:
        alpha = 1.0 - self.level
        low, high = np.quantile(draws, [alpha / 2, 1 - alpha / 2])
        return _number(low), _number(high)


def _number(x: float) -> float | None:
    return None if np.isnan(x) else float(x)


def _bootstrap(ref: _SentenceStats, stats: Sequence[_SentenceStats], resampling: Resampling | None) -> _Boot:
    """Every ratio of sums, and the distinct-token counts, at once from one resampling matrix: the premium's (same
    seed, same draws, exact integer sums, so the premium's interval is the one :func:`ratio_bootstrap` gives)."""
    if resampling is None:
        return _Boot()
    k, n_boot = len(stats), resampling.n_boot
    per = {
        name: np.column_stack([getattr(st, name) for st in stats])
        for name in ("tokens", "bytes", "chars", "fallback", "unknown_chars")
    }
    # a column of zeros (no fallback, no unknown: most languages) resamples to zeros: left out of the product
    used = {name: per[name].any(axis=0) for name in ("fallback", "unknown_chars")}
    blocks = [np.column_stack([ref.tokens, ref.bytes, ref.chars]), per["tokens"], per["bytes"], per["chars"]]
    blocks += [per[name][:, used[name]] for name in used]
    distinct = DistinctBootstrap([st.occurrences for st in stats], n_boot)
    sums = bootstrap_sums(np.hstack(blocks).astype(np.int64), n_boot, seed=resampling.seed, on_block=distinct.add_block)
    edges = np.cumsum([0, *(b.shape[1] for b in blocks)])
    tokens, nbytes, chars = (sums[:, edges[i] : edges[i + 1]] for i in (1, 2, 3))
    sparse = {}
    for name, i in (("fallback", 4), ("unknown_chars", 5)):
        sparse[name] = np.zeros((n_boot, k))
        sparse[name][:, used[name]] = sums[:, edges[i] : edges[i + 1]]
    with np.errstate(divide="ignore", invalid="ignore"):  # a resample without a language's tokens: nan, not a CI
        draws = {
            "premium": tokens / sums[:, :1],
            "tokens_per_byte": tokens / nbytes,
            "tokens_per_char": tokens / chars,
            "ref_tokens_per_byte": sums[:, :1] / sums[:, 1:2],
            "ref_tokens_per_char": sums[:, :1] / sums[:, 2:3],
            "byte_fallback_share": sparse["fallback"] / tokens,
            "unknown_char_share": sparse["unknown_chars"] / chars,
        }
    alpha = 1.0 - resampling.level
    ends = {}
    for name, values in draws.items():
        # a share that is 0 in every sentence is 0 in every resample (a language with no tokens: nan throughout)
        cols = {"byte_fallback_share": used["fallback"], "unknown_char_share": used["unknown_chars"]}.get(name)
        if cols is not None and not cols.all():
            whole = per["tokens" if name == "byte_fallback_share" else "chars"].any(axis=0)
            low = np.where(whole, 0.0, np.nan)
            high = low.copy()
            if cols.any():
                low[cols], high[cols] = np.quantile(values[:, cols], [alpha / 2, 1 - alpha / 2], axis=0)
        else:
            low, high = np.quantile(values, [alpha / 2, 1 - alpha / 2], axis=0)
        ends[name] = (np.broadcast_to(low, (k,)), np.broadcast_to(high, (k,)))
    ends["distinct_tokens"] = distinct_interval(
        np.array([st.occurrences.n_items for st in stats]), distinct.draws(), level=resampling.level
    )
    keep = ("premium", "tokens_per_byte", "byte_fallback_share")
    return _Boot(resampling.level, ends, {name: draws[name] for name in keep})


def distinct_interval(counts: np.ndarray, draws: np.ndarray, *, level: float) -> tuple[np.ndarray, np.ndarray]:
    """The normal bootstrap interval of each column's distinct count: ``count ± z · sd(draws)`` (Efron & Tibshirani
    1993, §13.2), z the standard normal quantile of (1 + level) / 2.

    Not the percentile interval: a resample repeats sentences and holds about 63% of the distinct ones, so its
    distinct count lies below the full count (Thai with Llama 2: 606 distinct tokens, resamples 409–496) and a
    percentile interval would not contain the count it is for. The resamples' spread is kept, centred on the count.
    """
    z = NormalDist().inv_cdf((1 + level) / 2)
    spread = z * draws.std(axis=0, ddof=1)
    return counts - spread, counts + spread


def _ratio(a: int, b: int) -> float:
    return a / b if b else float("nan")


def _diagnostics(
    st: _SentenceStats, ref: _SentenceStats, boot: _Boot, *, j: int, ref_words: int, petrov: bool
) -> Diagnostics:
    tokens, ref_tokens = int(st.tokens.sum()), int(ref.tokens.sum())
    chars, nbytes = int(st.chars.sum()), int(st.bytes.sum())
    ref_chars, ref_bytes = int(ref.chars.sum()), int(ref.bytes.sum())
    fallback, unknown, unknown_chars = int(st.fallback.sum()), int(st.unknown.sum()), int(st.unknown_chars.sum())
    point = {
        "tokens_per_byte": _ratio(tokens, nbytes),
        "tokens_per_char": _ratio(tokens, chars),
        "ref_tokens_per_byte": _ratio(ref_tokens, ref_bytes),
        "ref_tokens_per_char": _ratio(ref_tokens, ref_chars),
        "byte_fallback_share": _ratio(fallback, tokens),
        "unknown_char_share": _ratio(unknown_chars, chars),
    }
    fields: dict = {}
    for name in RATIO_DIAGNOSTICS:
        fields[name] = point[name]
        fields[f"{name}_low"], fields[f"{name}_high"] = boot.low(name, j), boot.high(name, j)
    unknown_share = _ratio(unknown, tokens)
    return Diagnostics(
        bytes=nbytes,
        chars=chars,
        ref_bytes=ref_bytes,
        ref_chars=ref_chars,
        ref_words=ref_words,
        byte_fallback_tokens=fallback,
        unknown_tokens=unknown,
        unknown_chars=unknown_chars,
        distinct_tokens=st.occurrences.n_items,
        distinct_tokens_low=boot.low("distinct_tokens", j),
        distinct_tokens_high=boot.high("distinct_tokens", j),
        unknown_token_share=unknown_share,
        petrov_blank=unknown_share > PETROV_UNKNOWN_LIMIT if petrov else None,
        **fields,
    )


def _fairness(rows: Sequence[Premium], boot: _Boot) -> list[dict]:
    """The Gini coefficient of the premiums and of tokens per byte across the languages, with CIs."""
    if len(rows) < 2:
        return []
    first = rows[0]
    points = {
        "premium": np.array([r.premium for r in rows]),
        "tokens_per_byte": np.array([r.diagnostics.tokens_per_byte for r in rows if r.diagnostics is not None]),
    }
    out = []
    for name, values in points.items():
        low, high = boot.interval(gini(boot.draws[name])) if boot.draws else (None, None)
        out.append(
            {
                "model": first.model,
                "index": "gini",
                "of": name,
                "value": float(gini(values)),
                "ci_low": low,
                "ci_high": high,
                "ci": first.ci,
                "n_langs": len(rows),
                "n_boot": first.n_boot,
                "seed": first.seed,
            }
        )
    return out


def _groups(rows: Sequence[Premium], boot: _Boot) -> list[dict]:
    """Mean premium and mean byte-fallback share per script and per resource class, with CIs."""
    classes = resource_classes()
    keys: dict[str, list[str | None]] = {
        "script": [script_of(r.lang) for r in rows],
        "resource": [None if r.lang not in classes else f"joshi2020-{classes[r.lang]}" for r in rows],
    }
    shares = np.array([r.diagnostics.byte_fallback_share if r.diagnostics else np.nan for r in rows])
    premiums = np.array([r.premium for r in rows])
    out = []
    for grouping, labels in keys.items():
        for group in sorted({x for x in labels if x is not None}):
            members = [j for j, x in enumerate(labels) if x == group]
            row: dict = {"model": rows[0].model, "grouping": grouping, "group": group, "n_langs": len(members)}
            row["langs"] = " ".join(rows[j].lang for j in members)
            for name, values in (("premium", premiums), ("byte_fallback_share", shares)):
                row[f"mean_{name}"] = _number(values[members].mean())
                ends = boot.interval(boot.draws[name][:, members].mean(axis=1)) if boot.draws else (None, None)
                row[f"mean_{name}_low"], row[f"mean_{name}_high"] = ends
            out.append(row)
    return out


def premium_study(
    tokenizer: ResolvedTokenizer,
    languages: Iterable[str] = DEFAULT_LANGS,
    *,
    source: str | None = None,
    text: PremiumText = PremiumText(),
    resampling: Resampling = DEFAULT_RESAMPLING,
    budgets: Sequence[int] | None = None,
    engine: str = "auto",
    on_progress: Callable[[int, int], None] | None = None,
) -> PremiumStudy:
    """Premium of each language against ``text.ref`` over a FLORES split in ``source``, with paired bootstrap CIs,
    its :class:`Diagnostics` and, across the languages, fairness and group aggregates (:class:`PremiumStudy`),
    all from one encode pass and one resampling matrix (every token id is kept and resampled: slower than
    :func:`token_premium`, which gives the same premiums and CIs alone). The parameters are
    :func:`token_premium`'s.
    """
    return _premiums(
        tokenizer,
        languages,
        _Counting(source, text, resampling, budgets, engine),
        on_progress=on_progress,
        diagnostics=True,
    )


def _premiums(
    tokenizer: ResolvedTokenizer,
    languages: Iterable[str],
    how: _Counting,
    *,
    on_progress: Callable[[int, int], None] | None,
    diagnostics: bool,
) -> PremiumStudy:
    """:func:`premium_study` (``diagnostics``), or its premiums alone from token counts (no ids kept)."""
    source, text, resampling, budgets, engine = how
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
    encode = counter.encode_batch if diagnostics else counter.count_tokens

    def measure(lines: list[str], out: Any) -> Any:  # token ids -> sentence stats; counts as they are
        return _sentence_stats(tokenizer, out, lines, tokenizer.token_classes) if diagnostics else out

    ref_stats = measure(texts[ref_code], encode(texts[ref_code]))
    ref_tokens = ref_stats.tokens if diagnostics else ref_stats
    if not ref_tokens.sum():  # the premium divides by it
        parts = split.split("+")
        where = (
            split if split in MGSM_CORPORA else " + ".join(flores_file(source, ref_code, split=part) for part in parts)
        )
        raise BadInputError(f"{where} has no tokens with {tokenizer.name}'s tokenizer")
    stats: list = []
    # a few languages per batched call: one call per language costs each library its per-call set-up (tiktoken
    # starts a thread pool per call) 204 times over; the counts are per line, so the split is exact
    for start in range(0, len(codes), LANGS_PER_CALL):
        chunk = codes[start : start + LANGS_PER_CALL]
        out = encode([line for code in chunk for line in texts[code]])
        at = 0
        for code in chunk:
            n = len(texts[code])
            stats.append(measure(texts[code], out[at : at + n]))
            at += n
        if on_progress:
            on_progress(start + len(chunk), len(codes))
    if protocol == "petrov2023" or not n_boot:
        n_boot = 0
    tokens = [st.tokens for st in stats] if diagnostics else stats
    if diagnostics:
        boot = _bootstrap(ref_stats, stats, resampling if n_boot else None)
    elif n_boot:
        boot = _Boot(ci, {"premium": ratio_bootstrap(np.column_stack(tokens), ref_tokens, resampling=resampling)})
    else:
        boot = _Boot()
    ref_words = sum(len(s.split()) for s in texts[ref_code])
    ref_total = int(ref_tokens.sum())
    results = []
    for j, code in enumerate(codes):
        total = int(tokens[j].sum())
        ratio = Fraction(total, ref_total)
        results.append(
            Premium(
                model=tokenizer.name,
                lang=code,
                ref=ref_code,
                split=split,
                premium=total / ref_total,
                ci_low=boot.low("premium", j),
                ci_high=boot.high("premium", j),
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
                diagnostics=_diagnostics(
                    stats[j], ref_stats, boot, j=j, ref_words=ref_words, petrov=protocol != "per-sentence"
                )
                if diagnostics
                else None,
            )
        )
    if not diagnostics:
        return PremiumStudy(results, [], [])
    return PremiumStudy(results, _fairness(results, boot), _groups(results, boot))


@dataclass(frozen=True)
class TokenPrice:
    """A model's price in USD per million tokens, of input (prompt) and output (generated) tokens."""

    input: float
    output: float

    def __post_init__(self) -> None:
        if not (self.input >= 0 and self.output >= 0):  # also refuses nan
            raise BadInputError(f"a price per million tokens must be a number >= 0, got {self.input}, {self.output}")


def language_costs(rows: Iterable[Premium], price: TokenPrice) -> list[dict]:
    """What the content of 1,000 English-equivalent words costs in each row's language at ``price``, and the extra
    over English.

    English-equivalent words: the whitespace-separated words of the reference side of the same sentence pairs
    (``ref_words``), so 1,000 of them are the content 1,000 reference words carry; a language's tokens per such
    1,000 words are 1000 · tokens(L) / ref_words. Cost = tokens · price / 10^6, for input and output tokens alike;
    ``extra_cost_*`` is the difference to the reference language's own cost (its share: ``premium - 1``).
    """
    out = []
    for r in rows:
        if r.diagnostics is None or not r.diagnostics.ref_words:
            raise BadInputError(f"no reference words to price {r.model} / {r.lang} by")
        per_k = 1000 * r.tokens / r.diagnostics.ref_words
        ref_per_k = 1000 * r.ref_tokens / r.diagnostics.ref_words
        out.append(
            {
                "model": r.model,
                "lang": r.lang,
                "price_in_per_mtok": price.input,
                "price_out_per_mtok": price.output,
                "tokens_per_1k_words": per_k,
                "ref_tokens_per_1k_words": ref_per_k,
                "cost_in_per_1k_words": per_k * price.input / 1e6,
                "cost_out_per_1k_words": per_k * price.output / 1e6,
                "extra_cost_in_per_1k_words": (per_k - ref_per_k) * price.input / 1e6,
                "extra_cost_out_per_1k_words": (per_k - ref_per_k) * price.output / 1e6,
            }
        )
    return out


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
    """The rows of :func:`premium_study`: premium of each language against ``text.ref`` over a FLORES split in
    ``source``, with paired bootstrap CIs, counted without keeping token ids (``diagnostics`` is None: the
    :class:`Diagnostics` come from :func:`premium_study`).

    ``text`` says which text and how (:class:`PremiumText`). ``budgets`` adds floor(r·B) for each B.
    ``resampling`` gives the CI (its ``n_boot`` resamples at ``level``, at least
    :func:`~mindcap_tok.resample.min_resamples` of it: 40 at 0.95); ``n_boot=0`` gives the premium alone
    (``ci_low = ci_high = None``, as ``petrov2023``). ``on_progress(done, total)`` is called per language.
    ``engine="reference"`` counts with the tokenizer family's own library even where tiktoken runs a
    ``tokenizer.json`` exactly and faster (module docstring).
    """
    how = _Counting(source, text, resampling, budgets, engine)
    return _premiums(tokenizer, languages, how, on_progress=on_progress, diagnostics=False).rows
