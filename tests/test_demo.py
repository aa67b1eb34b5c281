"""`mindcap-tok demo`: a simulated ledger of real Qwen3 ids and MGSM prompts whose facts the simulation fixes."""

from __future__ import annotations

import json
import math
import re

import pytest
from click.testing import CliRunner

from mindcap_tok.cli.main import cli
from mindcap_tok.demo.ledger import build_demo, demo_design
from mindcap_tok.scoring.score import score_ledger
from mindcap_tok.store.ledger import Ledger
from mindcap_tok.tasks.mgsm import load_mgsm

ITEMS, K = 12, 2
LANGS = {"deu_Latn", "tha_Thai", "swh_Latn"}
ARMS = {"native", "translate-act", "pivot", "code-switched"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory, qwen, config):
    out = tmp_path_factory.mktemp("demo") / "demo"
    build_demo(out, 7, n_items=ITEMS, k=K, tokenizer=qwen, data_dir=config.data_dir.value)
    return out


def test_the_ledgers_hold_the_designed_cells(demo, config):
    replay = Ledger(demo / "ledger").to_pandas()
    indep = Ledger(demo / "independent").to_pandas()
    # 4 arms x 3 languages replayed, plus native Thai announced at two budgets; 2 Thai arms x 5 caps independent
    assert len(replay) == ITEMS * K * (12 + 2) and len(indep) == ITEMS * K * 2 * 5
    plain = replay[replay["design"] == "replay"]
    assert set(plain["arm"]) == ARMS and set(plain["lang"]) == LANGS and set(replay["cap"]) == {4096}
    ann = replay[replay["design"] == "announcement"]
    assert set(zip(ann["arm"], ann["lang"], strict=True)) == {("native", "tha_Thai")} and set(ann["announced"]) == {
        256,
        1024,
    }
    assert set(indep["cap"]) == {256, 512, 652, 1024, 1305}  # B and floor(2.55 B) at 256, 512; and 1024
    assert set(indep["arm"]) == {"native", "translate-act"}
    assert (indep["n_tokens"] <= indep["cap"]).all() and set(indep["design"]) == {"independent"}
    for lang in LANGS:  # real MGSM items: gold answers and questions of that language
        items = load_mgsm(lang, config.data_dir.value)
        part = replay[replay["lang"] == lang]
        assert all(part["gold"] == [items[i].answer for i in part["item"]])
        assert all(items[i].question in p for i, p in zip(part["item"], part["prompt"], strict=True))
    assert "simulated" in (demo / "README.md").read_text("utf-8")


def test_the_paper_premiums_set_the_native_emission_medians():
    design = demo_design()
    median = {c.lang: math.exp(c.emission_mu) for c in design.cells if c.arm == "native"}
    assert design.premiums == {"deu_Latn": 1.56, "tha_Thai": 2.55, "swh_Latn": 1.94}
    assert median["tha_Thai"] / median["deu_Latn"] == pytest.approx(2.55 / 1.56)
    assert median["swh_Latn"] / median["deu_Latn"] == pytest.approx(1.94 / 1.56)


def test_scores_match_the_answer_line_spelled_into_each_trace(demo, qwen):
    records = Ledger(demo / "ledger").to_pandas().head(120)
    scores = score_ledger(records, qwen, budgets=[4096]).by_record
    answered = 0
    for rec, emission, correct in zip(records.itertuples(), scores["emission"], scores["correct"], strict=True):
        found = re.search(r"\n#### (\d+)", rec.text)
        if found is None:
            assert not correct and not emission <= 4096
            continue
        answered += 1
        value = found.group(1)
        assert bool(correct) == (int(value) == rec.gold)
        ids = list(rec.output_ids)
        # the emission position: the first prefix that shows the whole answer line (it occurs once)
        e = int(emission)
        assert f"#### {value}" in qwen.decode(ids[:e]) and f"#### {value}" not in qwen.decode(ids[: e - 1])
    assert answered > 60


def test_finished_traces_are_the_tokenizers_own_encoding(demo, config):
    """A model's ids are almost always the canonical encoding of its text; the demo's finished traces are all of
    them (so `price` finds no trace that re-encodes to another token count). Checked with HF tokenizers itself."""
    from tokenizers import Tokenizer

    hf = Tokenizer.from_file(str(config.tokenizers_dir.value / "qwen3" / "tokenizer.json"))
    for name in ("ledger", "independent"):
        records = Ledger(demo / name).to_pandas()
        done = records[records["finish_reason"] == "stop"]
        assert len(done) > 0.5 * len(records)
        encoded = [e.ids for e in hf.encode_batch(done["text"].tolist(), add_special_tokens=False)]
        assert encoded == [list(ids) for ids in done["output_ids"]]


def test_same_seed_same_bytes_other_seed_other_records(tmp_path, qwen, config):
    def shards(seed, name):
        build_demo(tmp_path / name, seed, n_items=3, k=1, tokenizer=qwen, data_dir=config.data_dir.value)
        return [s.sha256 for s in Ledger(tmp_path / name / "ledger").shards()]

    first = shards(1, "a")
    assert shards(1, "b") == first and shards(2, "c") != first


def test_cli_demo_then_sweep_and_report(tmp_path):
    run = CliRunner().invoke
    out = tmp_path / "demo"
    res = run(cli, ["demo", "--out-dir", str(out), "--items", "10", "--samples", "2"])
    assert res.exit_code == 0, res.output
    args = ["--premiums", "de=1.56,th=2.55,sw=1.94", "--budgets", "128,256", "--n-boot", "50"]
    res = run(cli, ["sweep", "--ledger", str(out / "ledger"), *args, "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["rows"]
    th = [r for r in rows if r["lang"] == "tha_Thai" and r["design"] == "replay"]
    assert [(r["budget"], r["scaled_budget"]) for r in th] == [(128, 326), (256, 652)]  # floor(2.55 B)
    res = run(cli, ["report", "--ledger", str(out / "ledger"), *args, "--out-dir", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "rep" / "report.md").is_file()
    indep = ["--frame", "independent", "--premiums", "th=2", "--budgets", "256,512", "--n-boot", "50"]
    res = run(cli, ["sweep", "--ledger", str(out / "independent"), *indep, "--format", "json"])
    assert res.exit_code == 0, res.output
    # confirm pairs the replay ledger's cells with the independent ledger's (designs differ by construction)
    both = ["--replay", str(out / "ledger"), "--independent", str(out / "independent"), "--lang", "th"]
    res = run(
        cli, ["confirm", *both, "--premiums", "th=2.55", "--budgets", "256,512", "--n-boot", "50", "--format", "json"]
    )
    assert res.exit_code == 0, res.output
    cells = json.loads(res.stdout)["cells"]
    assert [c["lang"] for c in cells] == ["tha_Thai"]  # the one native cell both ledgers hold


def test_a_failed_demo_leaves_nothing(tmp_path):
    out = tmp_path / "demo"
    res = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "nodata"), "demo", "--out-dir", str(out)])
    assert res.exit_code == 2 and "MGSM folder not found" in res.output
    assert list(tmp_path.iterdir()) == []


def _tree(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_demo_checks_both_folders_before_writing_either(tmp_path, demo):
    """--tiny-model into a folder holding a demo ledger, or the two folders overlapping: one line, and neither
    folder is written (the demo ledger is not built first and then left behind)."""
    held = _tree(demo)
    out = tmp_path / "new-demo"
    for tiny in (demo, demo / "ledger", out, out / "tiny"):
        res = CliRunner().invoke(cli, ["demo", "--out-dir", str(out), "--tiny-model", str(tiny), "--items", "2"])
        assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.output
        assert "Traceback" not in res.output
        assert not out.exists() and _tree(demo) == held
        assert list(tmp_path.iterdir()) == []
