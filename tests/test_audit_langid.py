"""Trace-language ID on traces whose language is known: the shipped lid.176 and a tiny GlotLID-style model."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from ledger_factory import make_record
from mindcap_tok.audits import (
    LidSettings,
    LidValidation,
    label_traces,
    langid_audit,
    load_lid_model,
    normalize_label,
    split_translate_act,
    validation_agreement,
)
from mindcap_tok.audits.langid import split_channels
from mindcap_tok.errors import MindcapError
from mindcap_tok.store.schema import validate_records

fasttext = pytest.importorskip("fasttext", reason="needs the lid extra")


def _flores(config, code: str, n: int, start: int = 0) -> list[str]:
    lines = (config.data_dir.value / "flores200" / "dev" / f"{code}.dev").read_text("utf-8").splitlines()
    return lines[start : start + n]


def test_labels_share_one_code_space():
    assert normalize_label("__label__th") == "tha_Thai"
    assert normalize_label("__label__tha_Thai") == "tha_Thai"
    assert normalize_label("__label__sw") == "swh_Latn"
    assert normalize_label("swc_latn") == "swc_Latn"  # GlotLID code with no FLORES entry: kept
    assert normalize_label("en") == "eng_Latn"
    assert normalize_label("deu") == "deu_Latn"


def test_translate_act_split():
    text = "Translation: Janet has 3 ducks.\n\nStep 1: 3 + 2 = 5\n#### 5\n"
    assert split_translate_act(text) == ("Janet has 3 ducks.", "Step 1: 3 + 2 = 5\n#### 5\n")
    assert split_translate_act("**English translation:** A cat.\n \nSo 4.") == ("A cat.", "So 4.")
    assert split_translate_act("no blank line here\n#### 4") == (None, None)
    assert split_translate_act("A\n---\nB", delimiter=r"\n---\n") == ("A", "B")


@pytest.fixture(scope="module")
def lid176():
    return load_lid_model(hub=False)


def test_shipped_lid176_on_known_languages(config, qwen, lid176):
    assert lid176.name == "lid.176" and len(lid176.sha256) == 64
    de, th, en = _flores(config, "deu_Latn", 3), _flores(config, "tha_Thai", 3), _flores(config, "eng_Latn", 3)
    recs = [make_record(qwen, t, lang="deu_Latn", item=i) for i, t in enumerate(de)]
    recs += [make_record(qwen, "\n".join([t, "#### 18"]), lang="tha_Thai", item=i) for i, t in enumerate(th)]
    # translate-act: a Thai "translation" paragraph must not count; the reasoning after it is English
    recs += [
        make_record(qwen, f"{th[i]}\n\n{t}\n#### 3", arm="translate-act", lang="tha_Thai", item=i)
        for i, t in enumerate(en)
    ]
    recs.append(make_record(qwen, "ok\n#### 3", lang="deu_Latn", item=9))  # too short to decide
    recs.append(make_record(qwen, f"{en[0]} {en[1]}", arm="translate-act", lang="deu_Latn", item=9))  # no delimiter
    labels = label_traces(validate_records(recs), lid176)
    assert labels["predicted"].tolist()[:9] == ["deu_Latn"] * 3 + ["tha_Thai"] * 3 + ["eng_Latn"] * 3
    assert labels["status"].tolist() == ["determinate"] * 9 + ["short", "no-delimiter"]
    result, sample = langid_audit(validate_records(recs), lid176, validation=LidValidation(per_cell=2), seed=7)
    table = result.tables["compliance"].set_index(["arm", "lang"])
    assert table.loc[("native", "deu_Latn"), "determinate"] == 3 and table.loc[("native", "deu_Latn"), "short"] == 1
    assert table.loc[("native", "deu_Latn"), "in_expected"] == 1.0
    assert table.loc[("translate-act", "tha_Thai"), "expected"] == "eng_Latn"
    assert table.loc[("translate-act", "tha_Thai"), "in_expected"] == 1.0
    assert table.loc[("translate-act", "deu_Latn"), "no_delimiter"] == 1
    assert result.summary["threshold"] == 0.5 and result.summary["seed"] == 7
    assert len(sample) == 2 + 2 + 2 and set(sample["seed"]) == {7} and (sample["human_label"] == "").all()


@pytest.fixture(scope="module")
def glot_style(config, tmp_path_factory):
    """A tiny fastText model with GlotLID labels: Swahili sentences split between swh_Latn and swc_Latn."""
    rows = [("swh_Latn", s) for s in _flores(config, "swh_Latn", 10)]
    rows += [("swc_Latn", s) for s in _flores(config, "swh_Latn", 10, start=40)]
    rows += [(c, s) for c in ("tha_Thai", "eng_Latn", "deu_Latn") for s in _flores(config, c, 10)]
    path = tmp_path_factory.mktemp("lid") / "train.txt"
    path.write_text("".join(f"__label__{c} {s}\n" for c, s in rows), "utf-8")
    out = path.parent / "model.bin"
    # this binding's training hits a NaN now and then whatever the seed, more often once other libraries are
    # loaded: train in a fresh interpreter and retry on NaN only
    script = (
        f"import fasttext; fasttext.train_supervised({str(path)!r}, dim=16, epoch=25, minn=1, maxn=4, "
        f"bucket=5000, thread=1, seed=0, verbose=0).save_model({str(out)!r})"
    )
    for _ in range(15):
        run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
        if run.returncode == 0:
            break
        assert "NaN" in run.stderr, run.stderr
    else:
        pytest.fail("fastText training hit NaN 15 times")
    return out


def test_glotlid_style_model_macrolanguage_and_validation(config, qwen, glot_style):
    model = load_lid_model(glot_style)
    assert model.name == "model.bin"
    swh, swc = _flores(config, "swh_Latn", 4), _flores(config, "swh_Latn", 2, start=40)
    texts = swh + swc  # 4 traces the model labels swh_Latn, 2 it labels swc_Latn (its training sentences)
    recs = [make_record(qwen, t, lang="swh_Latn", item=i) for i, t in enumerate(texts)]
    assert model.predict(texts)[0] == ["swh_Latn"] * 4 + ["swc_Latn"] * 2
    result, sample = langid_audit(
        validate_records(recs), model, settings=LidSettings(threshold=0.0), validation=LidValidation(per_cell=6)
    )
    row = result.tables["compliance"].iloc[0]
    assert row["determinate"] == 6
    assert row["in_expected"] == pytest.approx(4 / 6) and row["in_expected_macro"] == 1.0
    assert row["top_other"] is None  # every determinate trace is Swahili under the mapping
    # a human labels all six as Swahili (swh): 4/6 exact agreement fails a 90% criterion, 6/6 macro passes
    sample["human_label"] = "sw"
    table, summary = validation_agreement(sample, criterion=0.9)
    assert summary["labelled"] == 6 and summary["agreement"] == pytest.approx(4 / 6)
    assert summary["agreement_macro"] == 1.0
    assert not summary["all_cells_meet"] and summary["all_cells_meet_macro"]
    assert table["meets_criterion"].tolist() == [False]


def test_validation_agreement_ignores_unlabelled_rows():
    frame = pd.DataFrame(
        {
            "model": ["m"] * 3,
            "arm": ["native"] * 3,
            "lang": ["tha_Thai"] * 3,
            "item": [0, 1, 2],
            "sample": 0,
            "predicted": ["tha_Thai", "eng_Latn", "tha_Thai"],
            "human_label": ["th", "tha_Thai", ""],
        }
    )
    table, summary = validation_agreement(frame, criterion=0.5)
    assert summary["labelled"] == 2 and summary["agreement"] == 0.5 and table["meets_criterion"].tolist() == [True]


def test_cli_exports_the_sample_and_scores_returned_labels(config, qwen, tmp_path):
    from click.testing import CliRunner

    from mindcap_tok.cli.main import cli
    from mindcap_tok.store.ledger import Ledger

    de, th = _flores(config, "deu_Latn", 4), _flores(config, "tha_Thai", 4)
    recs = [make_record(qwen, t, lang="deu_Latn", item=i) for i, t in enumerate(de)]
    recs += [make_record(qwen, t, lang="tha_Thai", item=i) for i, t in enumerate(th)]
    Ledger(tmp_path / "L").append(recs, qwen)
    base = [
        "audit",
        "--ledger",
        str(tmp_path / "L"),
        "--only",
        "langid",
        "--no-hub",
        "--validation-per-cell",
        "3",
        "--seed",
        "11",
    ]
    res = CliRunner().invoke(cli, [*base, "--out-dir", str(tmp_path / "a")], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    sample = pd.read_csv(tmp_path / "a" / "langid_validation.csv", keep_default_na=False)
    assert len(sample) == 6 and set(sample["seed"]) == {11}
    # a human agrees on every trace but one German one, which they call English: 5/6 overall, 2/3 in German
    sample["human_label"] = sample["lang"].map({"deu_Latn": "de", "tha_Thai": "th"})
    sample.loc[sample.index[sample["lang"] == "deu_Latn"][0], "human_label"] = "en"
    sample.to_csv(tmp_path / "labels.csv", index=False)
    res = CliRunner().invoke(
        cli,
        [
            *base,
            "--out-dir",
            str(tmp_path / "b"),
            "--validation-labels",
            str(tmp_path / "labels.csv"),
            "--criterion",
            "80",
        ],
        catch_exceptions=False,
    )
    assert res.exit_code == 0, res.output
    langid = json.loads((tmp_path / "b" / "audit.json").read_text("utf-8"))["audits"][0]
    assert langid["summary"]["validation"]["agreement"] == pytest.approx(5 / 6)
    assert langid["summary"]["validation"]["criterion"] == 0.8
    assert [row["meets_criterion"] for row in langid["tables"]["validation"]] == [False, True]


def test_offline_default_falls_back_to_lid176(monkeypatch, tmp_path):
    import hashlib

    from mindcap_tok.audits.langid import shipped_lid176
    from mindcap_tok.errors import MindcapError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # GlotLID lives on the hub: offline, the shipped model serves
    model = load_lid_model()
    assert model.name == "lid.176"
    assert model.sha256 == hashlib.sha256(shipped_lid176().read_bytes()).hexdigest()  # streamed hash, same digest
    with pytest.raises(MindcapError, match="does not exist"):
        load_lid_model(tmp_path / "model.bin")
    (tmp_path / "bad.bin").write_bytes(b"not a model")
    with pytest.raises(MindcapError, match="not a fastText model"):
        load_lid_model(tmp_path / "bad.bin")


def test_thinking_records_are_labelled_per_channel(config, qwen, lid176):
    th, en = _flores(config, "tha_Thai", 2), _flores(config, "eng_Latn", 2)
    recs = []
    for i in range(2):  # a Thai thought, an English answer after it
        ids = [qwen.tokenizer.token_to_id("<think>")]
        ids += [*qwen.tokenizer.encode(th[i], add_special_tokens=False).ids, qwen.tokenizer.token_to_id("</think>")]
        end = len(ids) - 1
        ids += qwen.tokenizer.encode(f"\n{en[i]}\n#### 18", add_special_tokens=False).ids
        text = qwen.tokenizer.decode(ids, skip_special_tokens=True)
        recs.append(make_record(qwen, "x", lang="tha_Thai", item=i, thinking=True, think_end=end))
        recs[-1] |= {"output_ids": ids, "text": text}
    recs.append(make_record(qwen, f"{th[0]}\n#### 18", lang="tha_Thai", item=5))  # thinking off: one row
    result, _ = langid_audit(
        validate_records(recs), lid176, validation=LidValidation(per_cell=2), tokenizers={qwen.name: qwen}
    )
    table = result.tables["compliance"].set_index(["thinking", "channel"])
    assert table.loc[(True, "reasoning"), "in_expected"] == 1.0 and table.loc[(True, "reasoning"), "n"] == 2
    assert table.loc[(True, "answer"), "english"] == 1.0 and table.loc[(True, "answer"), "in_expected"] == 0.0
    assert table.loc[(False, "answer"), "n"] == 1 and table.loc[(False, "answer"), "in_expected"] == 1.0
    with pytest.raises(MindcapError, match="need their tokenizers"):
        langid_audit(validate_records(recs), lid176)


def test_think_markers_are_stripped_before_labelling(config, qwen, lid176):
    # Qwen3's <think> / </think> are added tokens that are not special: a decode keeps them as text
    th, en = _flores(config, "tha_Thai", 1)[0], _flores(config, "eng_Latn", 1)[0]
    tok = qwen.tokenizer
    ids = [tok.token_to_id("<think>"), *tok.encode(th, add_special_tokens=False).ids, tok.token_to_id("</think>")]
    end = len(ids) - 1
    second = [
        tok.token_to_id("<think>"),
        *tok.encode("again", add_special_tokens=False).ids,
        tok.token_to_id("</think>"),
    ]
    ids += [*tok.encode(f"\n{en}\n", add_special_tokens=False).ids, *second]
    assert "<think>" in tok.decode(ids[:end], skip_special_tokens=True)  # the markup the audit must not label
    rec = make_record(qwen, "x", item=0, thinking=True, think_end=end) | {"output_ids": ids, "text": "x"}
    split = split_channels(validate_records([rec]), {qwen.name: qwen})
    reasoning, answer = split.column("text").to_pylist()
    assert " ".join(reasoning.split()) == " ".join(th.split())  # the Thai thought, by hand, nothing else
    assert " ".join(answer.split()) == " ".join(f"{en} again".split())  # a second block: its words, no markup
    labels = label_traces(split, lid176)
    assert not any("think" in s for s in labels["segment"])
