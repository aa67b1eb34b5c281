"""Premium diagnostics against independent counts: byte-fallback shares recounted with sentencepiece, tokenizers and
tiktoken directly, tokens per byte recounted with tokenizers, the Gini coefficient against its closed form, costs and
unknown shares by hand, Petrov et al.'s published unknown fractions, and the wrapped 203-language plot."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
import sentencepiece
import tiktoken
from click.testing import CliRunner
from tokenizers import Tokenizer, models, pre_tokenizers

from figure_checks import covered_points, overprinted
from mindcap_tok.cli.main import cli
from mindcap_tok.data.languages import flores_codes
from mindcap_tok.data.petrov2023 import petrov2023_folder
from mindcap_tok.premium import PremiumText, TokenPrice, gini, language_costs, premium_study, resource_classes
from mindcap_tok.resample import Resampling, bootstrap_counts
from mindcap_tok.tokenization.load import ResolvedTokenizer, load_tokenizer

#: sentences per language in the default tests (the first lines of FLORES-200 devtest)
N_LINES = 300


def _subset(root: Path, flores_dir: str, codes: list[str]) -> tuple[str, dict[str, list[str]]]:
    """The first :data:`N_LINES` devtest lines of each language, as a FLORES folder, and the lines."""
    (root / "devtest").mkdir(parents=True)
    lines = {}
    for code in codes:
        text = Path(flores_dir, "devtest", f"{code}.devtest").read_text("utf-8").splitlines()[:N_LINES]
        (root / "devtest" / f"{code}.devtest").write_text("".join(x + "\n" for x in text), "utf-8")
        lines[code] = text
    return str(root), lines


def _flores(root: Path, files: dict[str, list[str]]) -> str:
    (root / "devtest").mkdir(parents=True)
    for code, lines in files.items():
        (root / "devtest" / f"{code}.devtest").write_text("".join(x + "\n" for x in lines), "utf-8")
    return str(root)


@pytest.mark.parametrize(("model", "folder"), [("llama-2", "llama2"), ("gemma-3", "gemma3")])
def test_sentencepiece_byte_fallback_shares_recounted_with_sentencepiece(model, folder, config, flores_dir, tmp_path):
    import unicodedata

    source, lines = _subset(tmp_path, flores_dir, ["eng_Latn", "tha_Thai", "deu_Latn"])
    study = premium_study(
        load_tokenizer(model, config.tokenizers_dir.value), ["th", "de"], source=source, resampling=Resampling(200, 0)
    )
    sp = sentencepiece.SentencePieceProcessor(model_file=str(config.tokenizers_dir.value / folder / "tokenizer.model"))
    for row in study.rows:
        ids = [i for s in sp.encode([unicodedata.normalize("NFC", x) for x in lines[row.lang]]) for i in s]
        assert row.tokens == len(ids)
        assert row.diagnostics.byte_fallback_tokens == sum(sp.is_byte(i) for i in ids)
        assert row.diagnostics.byte_fallback_share == sum(sp.is_byte(i) for i in ids) / len(ids)
        assert row.diagnostics.distinct_tokens == len(set(ids))
    th = study.rows[0].diagnostics
    # Llama 2 writes Thai partly in <0x..> pieces, Gemma 3 (262k pieces) hardly ever
    assert (th.byte_fallback_share > 0.05) == (model == "llama-2")


def test_qwen_byte_fallback_and_tokens_per_byte_recounted_with_tokenizers(config, flores_dir, tmp_path):
    import unicodedata

    source, lines = _subset(tmp_path, flores_dir, ["eng_Latn", "tha_Thai", "khm_Khmr", "deu_Latn"])
    study = premium_study(
        load_tokenizer("qwen3-8b", config.tokenizers_dir.value),
        ["th", "km", "de"],
        source=source,
        resampling=Resampling(200, 0),
    )
    tok = Tokenizer.from_file(str(config.tokenizers_dir.value / "qwen3" / "tokenizer.json"))
    ref = [unicodedata.normalize("NFC", x) for x in lines["eng_Latn"]]
    ref_ids = [e.ids for e in tok.encode_batch(ref, add_special_tokens=False)]
    for row in study.rows:
        text = [unicodedata.normalize("NFC", x) for x in lines[row.lang]]
        ids = [i for e in tok.encode_batch(text, add_special_tokens=False) for i in e.ids]
        # a byte-level token that is not whole characters decodes to the replacement character on its own
        partial = sum("\ufffd" in tok.decode([i]) for i in ids)
        d = row.diagnostics
        assert d.byte_fallback_tokens == partial
        assert d.tokens_per_byte == len(ids) / sum(len(x.encode("utf-8")) for x in text)
        assert d.tokens_per_char == len(ids) / sum(map(len, text))
        assert d.ref_tokens_per_byte == sum(map(len, ref_ids)) / sum(len(x.encode("utf-8")) for x in ref)
        assert d.unknown_tokens == d.unknown_chars == 0
    # Khmer is more than half bytes for Qwen3, German none
    assert study.rows[1].diagnostics.byte_fallback_share > 0.5 and study.rows[2].diagnostics.byte_fallback_tokens == 0


def test_tiktoken_byte_fallback_recounted_with_tiktoken(config, flores_dir, tmp_path):
    from tiktoken.load import load_tiktoken_bpe

    source, lines = _subset(tmp_path, flores_dir, ["eng_Latn", "amh_Ethi"])
    (row,) = premium_study(
        load_tokenizer("gpt-4", config.tokenizers_dir.value), ["am"], source=source, resampling=Resampling(0)
    ).rows
    folder = config.tokenizers_dir.value / "cl100k_base"
    spec = json.loads((folder / "encoding.json").read_text("utf-8"))
    enc = tiktoken.Encoding(
        "cl100k",
        pat_str=spec["pat_str"],
        mergeable_ranks=load_tiktoken_bpe(str(folder / "cl100k_base.tiktoken")),
        special_tokens={},
    )
    import unicodedata

    ids = [i for x in lines["amh_Ethi"] for i in enc.encode_ordinary(unicodedata.normalize("NFC", x))]

    def whole(i: int) -> bool:
        try:
            enc.decode_single_token_bytes(i).decode("utf-8")
        except UnicodeDecodeError:
            return False
        return True

    assert row.diagnostics.byte_fallback_tokens == sum(not whole(i) for i in ids)
    assert row.diagnostics.byte_fallback_share > 0.9  # Amharic is almost all byte tokens for cl100k


def test_gini_matches_its_closed_form():
    # sum_ij |x_i - x_j| over all ordered pairs of {1, 2, 3, 4} is 2 * (1+2+3+1+2+1) = 20; / (2 * 4^2 * 2.5) = 0.25
    assert gini(np.array([1.0, 2.0, 3.0, 4.0])) == pytest.approx(0.25)
    assert gini(np.array([2.0, 2.0, 2.0])) == pytest.approx(0.0)
    # {0, 0, 0, 1}: 6 / (2 * 16 * 0.25) = 0.75; rows are separate sets
    assert gini(np.array([[0.0, 0.0, 0.0, 1.0], [1.0, 2.0, 3.0, 4.0]])) == pytest.approx([0.75, 0.25])


def _whitespace(vocab: dict[str, int]) -> ResolvedTokenizer:
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return ResolvedTokenizer(name="ws", tokenizer=tok, source="test")


def test_hand_made_premiums_give_the_closed_form_gini_and_costs(tmp_path):
    # every pair has the ratio 1, 2, 3 and 4: premiums exactly {1, 2, 3, 4}, each resample too
    eng = ["a b", "a b c", "a"]
    files = {"eng_Latn": eng} | {
        code: [" ".join(["x"] * (k * len(s.split()))) for s in eng]
        for k, code in enumerate(["deu_Latn", "tha_Thai", "swh_Latn", "khm_Khmr"], 1)
    }
    tok = _whitespace({"[UNK]": 0, "a": 1, "b": 2, "c": 3, "x": 4})
    study = premium_study(tok, ["de", "th", "sw", "km"], source=_flores(tmp_path, files), resampling=Resampling(100, 3))
    assert [r.premium for r in study.rows] == [1.0, 2.0, 3.0, 4.0]
    (by_premium,) = [f for f in study.fairness if f["of"] == "premium"]
    assert by_premium["value"] == pytest.approx(0.25)
    assert by_premium["ci_low"] == pytest.approx(0.25) and by_premium["ci_high"] == pytest.approx(0.25)
    # tokens per byte at k = 2: lines "x x x x", "x x x x x x", "x x": 4 + 6 + 2 tokens over 7 + 11 + 3 bytes
    th = study.rows[1].diagnostics
    assert th.tokens_per_byte == 12 / (7 + 11 + 3)
    # English-equivalent words: 6 whitespace words of English; Thai 12 tokens -> 2000 tokens per 1,000 words
    (cost,) = language_costs(study.rows[1:2], TokenPrice(0.5, 1.5))
    assert cost["tokens_per_1k_words"] == 2000 and cost["ref_tokens_per_1k_words"] == 1000
    assert cost["cost_in_per_1k_words"] == pytest.approx(2000 * 0.5 / 1e6)
    assert cost["cost_out_per_1k_words"] == pytest.approx(2000 * 1.5 / 1e6)
    assert cost["extra_cost_in_per_1k_words"] == pytest.approx(1000 * 0.5 / 1e6)
    # groups: one language per script; Latn holds deu and swh (premiums 1 and 3, mean 2)
    (latn,) = [g for g in study.groups if g["grouping"] == "script" and g["group"] == "Latn"]
    assert latn["langs"] == "deu_Latn swh_Latn" and latn["mean_premium"] == 2.0
    (five,) = [g for g in study.groups if g["grouping"] == "resource"]
    assert (five["group"], five["langs"]) == ("joshi2020-5", "deu_Latn")


def test_unknown_shares_by_hand_and_petrovs_filter(tmp_path):
    # "zz" is not in the vocabulary: one unknown token standing for 2 characters
    files = {"eng_Latn": ["a b", "a"], "deu_Latn": ["a zz", "b"]}
    tok = _whitespace({"[UNK]": 0, "a": 1, "b": 2})
    (row,) = premium_study(tok, ["de"], source=_flores(tmp_path / "s", files), resampling=Resampling(50, 0)).rows
    d = row.diagnostics
    assert (d.unknown_tokens, d.unknown_chars, d.chars) == (1, 2, 5)
    assert d.unknown_char_share == 2 / 5 and d.unknown_token_share == 1 / 3
    assert d.petrov_blank is None  # only Petrov's protocol applies their filter
    text = PremiumText(protocol="petrov2023")
    (p,) = premium_study(tok, ["de"], source=_flores(tmp_path / "p", files), text=text).rows
    # one string "a zz b " : tokens a, [UNK], b -> 1/3 unknown, above their 10% limit
    assert p.diagnostics.unknown_token_share == pytest.approx(1 / 3) and p.diagnostics.petrov_blank is True


def test_diagnostic_cis_come_from_the_premiums_resampling_matrix(tmp_path, qwen, flores_dir):
    source, lines = _subset(tmp_path, flores_dir, ["eng_Latn", "tha_Thai"])
    (row,) = premium_study(qwen, ["th"], source=source, resampling=Resampling(400, 5)).rows
    import unicodedata

    text = [unicodedata.normalize("NFC", x) for x in lines["tha_Thai"]]
    tokens = np.array([len(qwen.encode(x)) for x in text], dtype=float)
    nbytes = np.array([len(x.encode("utf-8")) for x in text], dtype=float)
    weights = bootstrap_counts(len(text), 400, seed=5)
    low, high = np.quantile((weights @ tokens) / (weights @ nbytes), [0.025, 0.975])
    assert row.diagnostics.tokens_per_byte_low == low and row.diagnostics.tokens_per_byte_high == high
    # distinct tokens: the union of the drawn sentences' ids, resample by resample, from the same weights; the
    # interval is the count ± 1.96 standard deviations of those (a resample holds ~63% of the sentences, so its
    # count lies below the full one: every resample here is below it)
    from statistics import NormalDist, stdev

    ids = [set(qwen.encode(x)) for x in text]
    drawn = [len(set().union(*(ids[i] for i in np.flatnonzero(w)))) for w in weights]
    d = row.diagnostics
    assert d.distinct_tokens == len(set().union(*ids)) and max(drawn) < d.distinct_tokens
    half = NormalDist().inv_cdf(0.975) * stdev(drawn)
    assert d.distinct_tokens_low == pytest.approx(d.distinct_tokens - half, rel=1e-12)
    assert d.distinct_tokens_high == pytest.approx(d.distinct_tokens + half, rel=1e-12)


#: Petrov et al.'s column per registry tokenizer, and the languages checked against their unknown fractions
PETROV = {"llama-2": "LLAMA", "gpt-4": "cl100k_base"}
PETROV_LANGS = ["Thai", "German", "Khmer", "Burmese", "Amharic"]


@pytest.mark.parametrize("model", sorted(PETROV))
def test_unknown_fractions_match_petrovs_csv(model, config, flores_dir):
    import csv

    folder = petrov2023_folder(config.data_dir.value)
    with open(folder / "flores_language_map.csv", encoding="utf-8", newline="") as f:
        codes = {row[0].strip(): row[1].strip() for row in csv.reader(f) if len(row) == 2}
    with open(folder / "tokenization_unknown_fraction.csv", encoding="utf-8", newline="") as f:
        theirs = {row["Language"]: float(row[PETROV[model]]) for row in csv.DictReader(f)}
    rows = premium_study(
        load_tokenizer(model, config.tokenizers_dir.value),
        [codes[x] for x in PETROV_LANGS],
        source=flores_dir,
        text=PremiumText(split="dev+devtest", protocol="petrov2023"),
    ).rows
    assert [r.diagnostics.unknown_token_share for r in rows] == [theirs[x] for x in PETROV_LANGS]
    assert [r.diagnostics.petrov_blank for r in rows] == [theirs[x] > 0.1 for x in PETROV_LANGS]


def test_resource_classes_are_flores_codes_from_joshi_table_1():
    classes = resource_classes()
    assert len(classes) == 23 and set(classes) <= set(flores_codes())
    assert classes["eng_Latn"] == 5 and classes["kor_Hang"] == 4 and classes["heb_Hebr"] == 3
    assert classes["lao_Laoo"] == 2 and classes["fij_Latn"] == 1


def test_the_203_language_plot_wraps_into_columns_with_a_share_panel(tmp_path, monkeypatch):
    from mindcap_tok.report import figures

    langs = [c for c in flores_codes() if c != "eng_Latn"]
    rows = [
        {"model": m, "lang": c, "premium": p, "ci_low": p - 0.02, "ci_high": p + 0.02, "byte_fallback_share": s}
        | {"ref": "eng_Latn", "split": "devtest", "ci": 0.95}
        for i, c in enumerate(langs)
        for m, p, s in (("qwen3-8b", 1 + i / 40, i / 250), ("llama-2", 1 + i / 30, i / 220))
    ]
    caught = []
    monkeypatch.setattr(figures, "save_figure", lambda fig, path, **kw: caught.append(fig))
    figures.plot_premiums(rows, tmp_path / "p.png", paper=["tha_Thai", "deu_Latn"], marked=["khm_Khmr"])
    (fig,) = caught
    height = fig.get_size_inches()[1]
    assert len(fig.axes) >= 8 and height < 12  # 4 premium + 4 share panels, not one 27-inch column
    ticks = {t.get_text(): t for ax in fig.axes for t in ax.get_yticklabels() if t.get_text()}
    assert set(ticks) == set(langs)
    assert ticks["tha_Thai"].get_fontweight() == "bold" and ticks["khm_Khmr"].get_color() == "red"
    assert overprinted(fig) == []
    assert covered_points(fig) == []


def test_cli_writes_diagnostics_summary_and_costs(tmp_path):
    result = CliRunner().invoke(
        cli,
        [
            *("premium", "--lang", "th", "de", "--n-boot", "50", "--format", "json", "--out", str(tmp_path / "p.json")),
            *("--summary", str(tmp_path / "s.json"), "--price-per-mtok", "0.5,1.5"),
        ],
    )
    assert result.exit_code == 0, result.output
    rows = json.loads((tmp_path / "p.json").read_text("utf-8"))
    th = rows[0]
    assert th["cost_in_per_1k_words"] == pytest.approx(1000 * th["tokens"] / th["ref_words"] * 0.5 / 1e6)
    assert th["byte_fallback_share_low"] <= th["byte_fallback_share"] <= th["byte_fallback_share_high"]
    summary = json.loads((tmp_path / "s.json").read_text("utf-8"))
    premiums = [r["premium"] for r in rows]
    (g,) = [f for f in summary["fairness"] if f["of"] == "premium"]
    # two values: sum |x_i - x_j| = 2 |a - b|, over 2 * 4 * mean
    assert g["value"] == pytest.approx(2 * abs(premiums[0] - premiums[1]) / (8 * np.mean(premiums)))
    table = CliRunner().invoke(cli, ["premium", "--lang", "th", "de", "--n-boot", "50", "--diagnostics"])
    assert table.exit_code == 0 and f"Gini of premium over 2 languages {g['value']:.4f}" in table.output


@pytest.mark.parametrize("bad", ["x", "1,2,3", "-1", "nope=1"])
def test_a_bad_price_is_one_line(bad, tmp_path):
    result = CliRunner().invoke(cli, ["premium", "--lang", "th", "--price-per-mtok", bad, "--n-boot", "50"])
    assert result.exit_code == 2
    assert (
        result.output.count("\n") == 1 and result.output.startswith("error: ") and "--price-per-mtok" in result.output
    )


def test_a_sentencepiece_model_without_byte_fallback_counts_unknown_characters(tmp_path):
    import io

    from mindcap_tok.tokenization.sentencepiece_family import SentencePieceBackend, processor

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(["abc abd cab", "bad cab dab", "ab ba cd dc"] * 20),
        model_writer=model,
        vocab_size=12,
        model_type="bpe",
        character_coverage=1.0,
        byte_fallback=False,
        minloglevel=3,
    )
    tok = ResolvedTokenizer("sp", backend=SentencePieceBackend(processor(model.getvalue())), sha256="0")
    files = {"eng_Latn": ["ab cd", "ba"], "deu_Latn": ["ab жж", "xyz b"]}
    (row,) = premium_study(tok, ["de"], source=_flores(tmp_path, files), resampling=Resampling(40, 0)).rows
    # "жж" and "xyz" are outside the training alphabet: 5 of the 10 characters stand behind unknown pieces
    assert (row.diagnostics.unknown_chars, row.diagnostics.chars) == (5, 10)
    assert row.diagnostics.unknown_char_share == 0.5 and row.diagnostics.byte_fallback_tokens == 0


def test_a_tokenizer_json_with_byte_fallback_counts_its_byte_pieces(tmp_path):
    # "é" is not in the vocabulary: BPE with byte_fallback writes it as <0xC3> <0xA9>; "a" is a piece
    vocab = {"<unk>": 0, "a": 1} | {f"<0x{b:02X}>": 2 + b for b in range(256)}
    tok = Tokenizer(models.BPE(vocab, [], unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    resolved = ResolvedTokenizer(name="bf", tokenizer=tok, source="test")
    files = {"eng_Latn": ["a a", "a"], "deu_Latn": ["a é", "aa"]}
    (row,) = premium_study(resolved, ["de"], source=_flores(tmp_path, files), resampling=Resampling(40, 0)).rows
    # tokens: a, <0xC3>, <0xA9> | a, a -> 5 tokens, 2 of them byte pieces
    assert (row.tokens, row.diagnostics.byte_fallback_tokens) == (5, 2)
    assert row.diagnostics.unknown_tokens == 0 and row.diagnostics.distinct_tokens == 3


def test_token_premium_gives_the_studys_premiums_and_cis_without_keeping_ids(tmp_path, qwen, flores_dir):
    from mindcap_tok.premium import token_premium

    source, _ = _subset(tmp_path, flores_dir, ["eng_Latn", "tha_Thai", "deu_Latn"])
    study = premium_study(qwen, ["th", "de"], source=source, resampling=Resampling(300, 2)).rows
    alone = token_premium(qwen, ["th", "de"], source=source, resampling=Resampling(300, 2))
    assert [(r.premium, r.ci_low, r.ci_high, r.tokens) for r in alone] == [
        (r.premium, r.ci_low, r.ci_high, r.tokens) for r in study
    ]
    assert all(r.diagnostics is None for r in alone) and all(r.diagnostics is not None for r in study)
