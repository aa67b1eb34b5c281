"""`mindcap-tok demo --tiny-model DIR`: a random-weights Qwen3 with the real Qwen3 tokenizer that `generate
--backend transformers` runs on CPU."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from mindcap_tok.cli.main import cli
from mindcap_tok.store.ledger import Ledger

pytest.importorskip("torch", reason="the tiny model needs the torch extra")

IM_START = 151644  # <|im_start|> in the released Qwen3 tokenizer (tokenizer.json, added_tokens)


@pytest.mark.slow
def test_tiny_model_generates_real_qwen3_ids(tmp_path, qwen):
    run = CliRunner().invoke
    model = tmp_path / "tiny"
    res = run(cli, ["demo", "--tiny-model", str(model)])
    assert res.exit_code == 0, res.output
    assert (model / "chat_template.jinja").is_file() or "chat_template" in (model / "tokenizer_config.json").read_text()
    job = tmp_path / "job.toml"
    job.write_text(
        f'name = "t"\nmodel = "{model}"\nmodel_name = "tiny-qwen3"\narms = ["native"]\nlangs = ["th"]\n'
        'items = [0]\nk = 1\ndesign = "replay"\ncaps = [6]\n',
        "utf-8",
    )
    res = run(cli, ["generate", str(job), "--out-dir", str(tmp_path / "led"), "--backend", "transformers"])
    assert res.exit_code == 0, res.output
    (rec,) = Ledger(tmp_path / "led").to_pandas().to_dict("records")
    assert rec["prompt_ids"][0] == IM_START and 1 <= len(rec["output_ids"]) <= 6
    assert max(rec["output_ids"]) < qwen.vocab_size
    prompt = qwen.decode(list(rec["prompt_ids"]))
    assert prompt.startswith("<|im_start|>user\n") and rec["prompt"] in prompt


def test_demo_needs_a_folder():
    res = CliRunner().invoke(cli, ["demo"])
    assert res.exit_code == 2 and "give --out-dir DIR" in res.output
