"""Notebooks run offline end to end, twice without harm, leave git status clean, print what their stored
outputs show, and what they compute matches the paper's published premiums and counts made here."""

import ast
import math
import os
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from notebook_outputs import machine_paths, text_outputs

pytestmark = pytest.mark.notebook
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.mark.slow
def test_premiums_notebook(tmp_path, monkeypatch):
    nb = _run("01_premiums.ipynb", tmp_path, monkeypatch)
    last = nb.cells[-1].outputs[0]["data"]["text/plain"]
    summary = ast.literal_eval(last)
    # paper §3: Qwen de 1.56 / th 2.55 / sw 1.94, Llama de 1.58 / th 2.19 / sw 1.93
    expected = {
        "qwen3-8b/deu_Latn": 1.56,
        "qwen3-8b/tha_Thai": 2.55,
        "qwen3-8b/swh_Latn": 1.94,
        "llama-3.1-8b/deu_Latn": 1.58,
        "llama-3.1-8b/tha_Thai": 2.19,
        "llama-3.1-8b/swh_Latn": 1.93,
    }
    for key, value in expected.items():
        assert round(summary[key], 2) == value, key
    assert {k.split("/")[0] for k in summary} == {"qwen3-8b", "llama-3.1-8b", "mistral-nemo", "whisper"}
    # the text says Qwen3 and Llama 3.1 differ most on Amharic, Llama's premium the larger: its own output must show it
    langs = {k.split("/")[1] for k in summary}
    gap = {lang: summary[f"llama-3.1-8b/{lang}"] - summary[f"qwen3-8b/{lang}"] for lang in langs}
    assert max(gap, key=lambda lang: abs(gap[lang])) == "amh_Ethi" and gap["amh_Ethi"] > 0
    assert "differ most on\nAmharic (`amh_Ethi`), where Llama 3.1's premium is the larger" in "".join(
        c.source for c in nb.cells if c.cell_type == "markdown"
    )
    assert (_out(tmp_path, "01_premiums") / "premiums.png").read_bytes()[:4] == b"\x89PNG"


def _out(tmp_path, stem: str):
    """The folder a notebook run from ``tmp_path`` writes into (its first cell makes it and moves there)."""
    return tmp_path / "notebook-output" / stem


def _git(folder, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=True).stdout


def _run(name: str, tmp_path, monkeypatch, *, times: int = 1):
    """Run a notebook ``times`` times from ``tmp_path`` as a user would from notebooks/ (there a git repository
    holding the checkout's .gitignore); check after each run that it wrote only into its own ignored folder (git
    status clean) and that what it printed equals the outputs stored in the repository (see notebook_outputs)."""
    monkeypatch.setenv("MINDCAP_CONFIG", str(NOTEBOOKS.parent / "mindcap.toml"))  # the kernel runs in tmp_path
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # the kernel imports this checkout's package, whatever is installed (a relative PYTHONPATH would not reach it)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(NOTEBOOKS.parent / "src"), os.environ.get("PYTHONPATH", "")]))
    shutil.copy(NOTEBOOKS.parent / ".gitignore", tmp_path / ".gitignore")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", ".gitignore")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qm", "checkout")
    stored = nbformat.read(NOTEBOOKS / name, as_version=4)
    assert machine_paths(stored) == []
    stem = name.removesuffix(".ipynb")
    for _ in range(times):
        nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}})
        client.execute()
        assert _git(tmp_path, "status", "--porcelain", "--untracked-files=all") == ""
        assert [p.name for p in (tmp_path / "notebook-output").iterdir()] == [stem]
        printed = [c for c in nb.cells if c.cell_type == "code"]  # standard error (warnings) is not stored
        for cell in printed:
            cell.outputs = [o for o in cell.outputs if not (o.output_type == "stream" and o.name == "stderr")]
        assert machine_paths(nb) == []
        assert text_outputs(nb) == text_outputs(stored), f"{name}: stored outputs differ from a fresh run's"
    return nb


@pytest.mark.slow
def test_demo_pipeline_notebook(tmp_path, monkeypatch):
    nb = _run("02_demo_pipeline.ipynb", tmp_path, monkeypatch)
    summary = ast.literal_eval(nb.cells[-1].outputs[0]["data"]["text/plain"])
    largest = summary.pop("largest")
    # floor(r·B) with the README's Qwen3 FLORES premiums, printed to 3 decimals (1.559 / 2.551 / 1.936)
    readme_premiums = {"deu_Latn": 1.559, "tha_Thai": 2.551, "swh_Latn": 1.936}
    assert set(summary) == set(readme_premiums)
    for lang, r in readme_premiums.items():
        b = summary[lang]["peak_budget"]
        assert math.floor((r - 5e-4) * b) <= summary[lang]["scaled_budget"] <= math.floor((r + 5e-4) * b), lang
    for row in summary.values():
        low, high = row["ci"]
        assert low <= row["delta"] <= high and row["delta"] > 0
    # the text's claim ("the largest peak") is the argmax of what it printed; Thai has the largest premium
    assert largest == max(summary, key=lambda lang: summary[lang]["delta"]) == "tha_Thai"
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert f"largest peak: tha_Thai at B = {summary['tha_Thai']['peak_budget']}" in printed
    assert (_out(tmp_path, "02_demo_pipeline") / "demo-report" / "native_curves.png").read_bytes()[:4] == b"\x89PNG"
    assert any("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)


@pytest.mark.slow
def test_protocol_notebook(tmp_path, monkeypatch):
    from statsmodels.stats.multitest import multipletests

    nb = _run("03_protocol.ipynb", tmp_path, monkeypatch)
    summary = ast.literal_eval(nb.cells[-1].outputs[0]["data"]["text/plain"])
    ids, pvalues, adjusted, decisions = zip(*summary["tests"], strict=True)
    assert ids == ("H1-existence", "H2", "H3-th")
    reject, holm, _, _ = multipletests(pvalues, alpha=summary["alpha"], method="holm")
    assert list(adjusted) == pytest.approx(list(holm))
    assert [d == "reject" for d in decisions] == list(reject)
    # the protocol's outcome labels (paper §3): every null rejected, some, none
    label = "confirmatory_support" if reject.all() else "partial_support" if reject.any() else "no_confirmatory_support"
    assert summary["outcome"] == label
    assert summary["refused"] is True  # the edited file was refused
    assert (_out(tmp_path, "03_protocol") / "protocol.toml.freeze.json").is_file()


@pytest.mark.slow
def test_pricing_notebook(tmp_path, monkeypatch):
    nb = _run("04_pricing.ipynb", tmp_path, monkeypatch)
    rows = ast.literal_eval(nb.cells[-1].outputs[0]["data"]["text/plain"])
    assert [r["cap"] for r in rows] == [256, 512]
    for r in rows:
        assert r["closure"] == pytest.approx(r["G"] - r["G3"])  # closure = G − G3 by definition
    assert rows[0]["G_max"] == rows[1]["G_max"]  # the gap at B_max does not depend on the priced cap
    assert rows[0]["nat_gain"] > rows[1]["nat_gain"]  # a tighter cap leaves more for the longer cap to recover
    (cell,) = [c for c in nb.cells if "pricing.triage()" in c.source]
    triage = "".join(o.get("text", "") for o in cell.outputs)
    for r in rows:  # the sentences print the table's numbers, in points
        assert f"At cap {r['cap']}: " in triage and f"G = {100 * r['G']:+.1f}." in triage


@pytest.mark.slow
def test_audits_notebook(tmp_path, monkeypatch):
    import json

    nb = _run("05_audits.ipynb", tmp_path, monkeypatch)
    summary = ast.literal_eval(nb.cells[-1].outputs[0]["data"]["text/plain"])
    # 60 items x 4 samples x (4 arms x 3 languages + 2 announcement cells)
    assert summary["records"] == 60 * 4 * 14
    # the demo's translate-act traces hold no translation segment: the translation audit scores none and says so
    assert summary["status"] == {"comet": "skipped", "parser": "ok", "parity": "ok", "normalizer": "ok"}
    assert summary["files"] == ["audit.json", "audit.md"]
    report = json.loads((_out(tmp_path, "05_audits") / "audit" / "audit.json").read_text())
    parity = next(a for a in report["audits"] if a["name"] == "parity")
    # the demo stores each trace's text as the decoding of its ids, so a local decode agrees everywhere
    assert parity["summary"]["raw_agreement"] == 1.0 and parity["summary"]["sampled"] > 0


@pytest.mark.slow
def test_determinism_notebook(tmp_path, monkeypatch):
    pytest.importorskip("torch")  # the torch extra: the tiny model runs on the transformers backend
    from statsmodels.stats.proportion import proportion_confint

    nb = _run("06_determinism.ipynb", tmp_path, monkeypatch)
    s = ast.literal_eval(nb.cells[-1].outputs[0]["data"]["text/plain"])
    # 2 items x (caps 4, 8 and long cap 16) repeat groups; a capped-vs-long pair per item and cap below long_cap
    assert (s["repeat_groups"], s["prefix_pairs"]) == (6, 4)
    for part, n in (("repeat", s["repeat_groups"]), ("prefix", s["prefix_pairs"])):
        k = s[f"{part}_identical"]
        assert s[f"{part}_share"] == pytest.approx(k / n)
        assert s[f"{part}_ci"] == pytest.approx(list(proportion_confint(k, n, method="wilson")))


def _flores(config, split: str, code: str) -> list[str]:
    """FLORES-200 lines of one language, read from the configured folder and NFC-normalised here."""
    import unicodedata

    path = config.data_dir.value / "flores200" / split / f"{code}.{split}"
    return [unicodedata.normalize("NFC", line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.slow
def test_extension_notebook(tmp_path, monkeypatch, config):
    import json
    import statistics

    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    nb = _run("07_extension.ipynb", tmp_path, monkeypatch, times=2)  # a second run once failed: the folder existed
    s = ast.literal_eval(nb.cells[-1].outputs[0]["data"]["text/plain"])
    base_path = config.tokenizers_dir.value / "qwen3" / "tokenizer.json"  # what registry name qwen3-8b names
    base_json = json.loads(base_path.read_text(encoding="utf-8"))
    base_merges, base_vocab = base_json["model"]["merges"], base_json["model"]["vocab"]
    base_added = {t["content"]: t["id"] for t in base_json["added_tokens"]}
    largest = max([*base_vocab.values(), *base_added.values()])
    base = Tokenizer.from_file(str(base_path))
    thai_dev, english_dev = _flores(config, "dev", "tha_Thai"), _flores(config, "dev", "eng_Latn")
    thai_test, english_test = _flores(config, "devtest", "tha_Thai"), _flores(config, "devtest", "eng_Latn")

    def count(tok, texts):
        return [len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)]

    size, folds = s["size"], 2
    assert s["base_merges"] == len(base_merges) and s["merges"] == [len(base_merges) + size] * folds
    ratios = []
    for k in range(folds):
        folder = _out(tmp_path, "07_extension") / "th-ext" / f"fold-{k}"
        data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
        merges, vocab = data["model"]["merges"], data["model"]["vocab"]
        # the base merge list is the file's prefix, in order; every base id (specials included) is unchanged
        assert merges[: len(base_merges)] == base_merges and len(merges) == len(base_merges) + size
        assert all(vocab.get(t) == i for t, i in base_vocab.items())
        assert all(t["id"] == base_added[t["content"]] for t in data["added_tokens"]) and len(
            data["added_tokens"]
        ) == len(base_added)
        new_ids = sorted(i for t, i in vocab.items() if t not in base_vocab and t not in base_added)
        assert new_ids == list(range(largest + 1, largest + 1 + size))
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        held_out, training = manifest["held_out_items"], manifest["training_items"]
        assert set(held_out).isdisjoint(training) and set(held_out) | set(training) == set(range(len(thai_dev)))
        assert s["held_out"][k] == len(held_out)
        # the held-out counts and premium, counted here with `tokenizers` on the FLORES files themselves
        ext = Tokenizer.from_file(str(folder / "tokenizer.json"))
        thai = [thai_dev[i] for i in held_out]
        english = [english_dev[i] for i in held_out]
        ext_encodings = ext.encode_batch(thai, add_special_tokens=False)
        assert [ext.decode(e.ids) for e in ext_encodings] == thai
        thai_base, thai_ext = count(base, thai), [len(e.ids) for e in ext_encodings]
        assert all(e <= b for e, b in zip(thai_ext, thai_base, strict=True))
        ratios += [e / b for e, b in zip(thai_ext, thai_base, strict=True)]
        sums = {"thai_base": sum(thai_base), "thai_ext": sum(thai_ext)}
        sums |= {"english_base": sum(count(base, english)), "english_ext": sum(count(ext, english))}
        assert s["held_out_tokens"][k] == sums
        held = [sums["thai_base"] / sums["english_base"], sums["thai_ext"] / sums["english_ext"]]
        assert s["held_out_premium"][k] == pytest.approx(held, abs=1e-6)
        # what the library reported on devtest: the ratio of summed devtest counts
        devtest = [sum(count(t, thai_test)) / sum(count(t, english_test)) for t in (base, ext)]
        assert s["devtest_premium"][k] == pytest.approx(devtest, abs=1e-6)
        # transformers reads the folder and gives these ids
        hf = AutoTokenizer.from_pretrained(folder)
        assert hf(thai, add_special_tokens=False)["input_ids"] == [e.ids for e in ext_encodings]
    # the text's claims: every invariant held on both folds, the premium fell on both, English unchanged
    assert s["base_merges_first"] == s["new_ids_follow"] == [True] * folds
    for key in ("base_ids_moved", "special_ids_moved", "round_trip_failures", "not_coarsening", "longer"):
        assert s[key] == [0] * folds, key
    assert s["transformers_differ"] == [0] * folds
    assert all(after < before for before, after in s["devtest_premium"] + s["held_out_premium"])
    assert s["english_token_change"] == [0.0] * folds
    assert all(t["english_base"] == t["english_ext"] for t in s["held_out_tokens"].values())
    assert f"median {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}" in s["caption"]
    printed = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    assert s["caption"] in printed
    assert (_out(tmp_path, "07_extension") / "extension.png").read_bytes()[:4] == b"\x89PNG"
    assert any("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs)


@pytest.mark.slow
def test_roundtrip_notebook(tmp_path, monkeypatch, config):
    pytest.importorskip("torch")  # the torch extra: the tiny model runs on the transformers backend
    pytest.importorskip("sacrebleu")  # the chrf extra: chrF along the chain
    import json
    from collections import defaultdict

    import pyarrow.parquet as pq
    from sacrebleu.metrics import CHRF
    from tokenizers import Tokenizer

    nb = _run("08_roundtrip.ipynb", tmp_path, monkeypatch)
    s = ast.literal_eval(nb.cells[-1].outputs[0]["data"]["text/plain"])
    run = _out(tmp_path, "08_roundtrip") / "rt-run"
    hops = [r for f in sorted((run / "hops").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    judged = [r for f in sorted((run / "judge").glob("*.parquet")) for r in pq.read_table(f).to_pylist()]
    # 2 sentences x 2 sequences (en>de>en, en>th>en) x 2 hops, no chain ended early; one judge reply per chain
    assert s["plan"]["chains"] == 2 * 2 and s["plan"]["waves"] == 2
    assert len(hops) == s["counts"]["hops"] == len(s["hops"]) == 2 * 2 * 2 and not any(r["empty"] for r in hops)
    assert len(judged) == s["counts"]["samples"] == 4
    # judged = replies that parsed; the rest of the finished chains are unjudged (no chain failed)
    parsed = sum(r["parse"] is not None for r in judged)
    assert (s["counts"]["judged"], s["counts"]["unjudged"], s["counts"]["failed_empty_hop"]) == (parsed, 4 - parsed, 0)
    # the text's claims: no sample judged, every hop stopped at its cap
    assert parsed == 0 and all(r["finish_reason"] == "length" and len(r["output_ids"]) == r["cap"] for r in hops)
    # token counts with the real Qwen3 tokenizer, read with `tokenizers` itself; sources read from the FLORES files
    path = config.tokenizers_dir.value / "qwen3" / "tokenizer.json"
    qwen = Tokenizer.from_file(str(path))
    special = {t["id"] for t in json.loads(path.read_text("utf-8"))["added_tokens"] if t["special"]}
    english = _flores(config, "devtest", "eng_Latn")
    refs = {lang: _flores(config, "devtest", lang) for lang in {r["tgt_lang"] for r in hops}}
    expected, totals, chrf = {}, defaultdict(lambda: [0, 0, 0]), defaultdict(list)
    for r in hops:
        line = int(r["text_id"].removeprefix("devtest:"))
        out = sum(i not in special for i in r["output_ids"])
        src = len(qwen.encode(english[line], add_special_tokens=False).ids)
        assert qwen.decode(r["output_ids"], skip_special_tokens=True) == r["text"]  # the text is its ids' decoding
        expected[(r["text_id"], r["sequence"], r["hop"])] = (out, src, r["capped"])
        key = (r["sequence"], r["hop"])
        totals[key] = [totals[key][0] + 1, totals[key][1] + out, totals[key][2] + src]
        chrf[key].append(CHRF().sentence_score(r["text"], [refs[r["tgt_lang"]][line]]).score)
    assert {(t, q, h): (o, n, c) for t, q, h, o, n, c in s["hops"]} == expected
    assert len(s["hop_tokens"]) == len(totals)
    for seq, hop, n, out, src, share, ratio in s["hop_tokens"]:
        assert (n, out, src) == tuple(totals[(seq, hop)]) and share == 1.0
        assert ratio == pytest.approx(out / src)
    assert len({ratio for *_, ratio in s["hop_tokens"]}) == 1  # the text: every hop's ratio is the same
    assert {(q, h): v for q, h, v in s["hop_chrf"]} == pytest.approx({k: sum(v) / len(v) for k, v in chrf.items()})
    # the files the report names exist; both figures are PNGs, and shown inline
    report = _out(tmp_path, "08_roundtrip") / "rt-report"
    assert {"pass_share.png", "token_cost.png", "hop_tokens.csv", "hop_quality.csv"} <= set(s["files"])
    assert all((report / f).is_file() for f in s["files"])
    assert all((report / f).read_bytes()[:4] == b"\x89PNG" for f in ("pass_share.png", "token_cost.png"))
    assert sum("image/png" in o.get("data", {}) for c in nb.cells if c.cell_type == "code" for o in c.outputs) == 2


def test_the_output_comparison_sees_a_changed_value_but_not_a_changed_time():
    from nbformat.v4 import new_code_cell, new_notebook, new_output

    def notebook(printed: str, result: str, warning: str = "/tmp/x.py:1: Warning\n") -> nbformat.NotebookNode:
        cell = new_code_cell("x")
        cell.outputs = [
            new_output("stream", name="stdout", text=printed),
            new_output("stream", name="stderr", text=warning),
            new_output("execute_result", data={"text/plain": result}, execution_count=1),
        ]
        return new_notebook(cells=[cell])

    first = notebook("learned 2 folds in 12.3 s\n", "{'seconds': 1.459, 'delta': 0.25}")
    again = notebook("learned 2 folds in 9.0 s\n", "{'seconds': 0.7, 'delta': 0.25}")
    changed = notebook("learned 2 folds in 9.0 s\n", "{'seconds': 0.7, 'delta': 0.26}")
    assert text_outputs(first) == text_outputs(again) != text_outputs(changed)
    assert machine_paths(first) == ["/tmp/x.py:1: Warning"]  # stored notebooks keep no standard error
    assert machine_paths(notebook("wrote report/\n", "'report'", warning="")) == []
