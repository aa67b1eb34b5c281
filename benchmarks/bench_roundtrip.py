"""Benchmark: orchestration overhead of ``run_roundtrip`` on 200 FLORES texts × ``lit:all`` (8 sequences,
8,000 hops in 5 waves, 1,600 judge requests), with a dry engine that echoes its input.

The dry backend implements the backend interface (``tok``, ``generate``, ``name``, ``version``) with the real
Qwen3 chat tokenizer: a translation request returns the ids of its SOURCE TEXT (so a chain carries the same
text through every hop), a judge request a fixed, valid MQM reply. Time inside ``generate`` is the engine's,
less Python's garbage collector pauses in it (collections of the run's objects can fall in any call);
everything else (prompts, chat templates, seeds, decoding, Parquet waves and manifest commits, the samples
table) and every collector pause is orchestration, timed on the wall clock and as this process's CPU time
(which other jobs on the cores do not inflate). ``--tokens-per-s R`` makes the dry engine sleep as a batched
engine producing R output tokens per second would (0: pure echo, which gives the overhead in absolute terms).
The run's prompts are then rebuilt with one ``ChatTokenizer.chat`` each, timed against ``chat_batch`` and
checked to be identical.

    python benchmarks/bench_roundtrip.py [--texts 200] [--tokens-per-s 0] [--tokens-per-s 20000]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from mindcap_tok.config import load_config
from mindcap_tok.generation.backends import ChatTokenizer, Completion, GenRequest
from mindcap_tok.roundtrip import parse_spec, plan_roundtrip, run_roundtrip

REPO = Path(__file__).resolve().parents[1]
REPLY = json.dumps(
    {"score": 90, "classification": "8-very good", "issues": [{"severity": "minor", "description": "x"}]}
)
MARK = 'SOURCE TEXT:\n"'
#: Qwen's ChatML (the shared tokenizer folder has no template), thinking off as in ``ChatTokenizer.chat``
CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n\n</think>\n\n{% endif %}"
)


class TimedTokenizer:
    """The chat tokenizer, with the time spent in ``chat_batch`` (template + encode) and ``decode_batch`` recorded,
    and every prompt kept (to time the one-``chat``-per-request path on them afterwards)."""

    def __init__(self, inner: ChatTokenizer) -> None:
        self.inner, self.hf, self.seconds = inner, inner.hf, {"chat": 0.0, "decode": 0.0}
        self.prompts: list[tuple[str, tuple[str, list[int]]]] = []

    def chat_batch(self, users: list[str]) -> list[tuple[str, list[int]]]:
        start = time.perf_counter()
        out = self.inner.chat_batch(users)
        self.seconds["chat"] += time.perf_counter() - start
        self.prompts += zip(users, out, strict=True)
        return out

    def decode_batch(self, ids: list) -> list[str]:
        start = time.perf_counter()
        out = self.inner.decode_batch(ids)
        self.seconds["decode"] += time.perf_counter() - start
        return out

    def encode(self, text: str) -> list[int]:
        return self.inner.encode(text)


class GcClock:
    """Seconds of Python's cyclic garbage collector, split into pauses inside the engine calls and outside."""

    def __init__(self) -> None:
        self.seconds, self.in_engine, self._start = {True: 0.0, False: 0.0}, False, 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds[self.in_engine] += time.perf_counter() - self._start


class EchoBackend:
    """A dry engine: echoes each translation request's source text, answers each judge request with REPLY."""

    name, version = "echo", "1"

    def __init__(self, tok: TimedTokenizer, tokens_per_s: float, gc_clock: GcClock) -> None:
        self.tok, self.tokens_per_s, self.gc_clock = tok, tokens_per_s, gc_clock
        self.end = tok.hf.convert_tokens_to_ids("<|im_end|>")
        self.reply = (*tuple(tok.encode(REPLY)), self.end)
        self.seconds, self.cpu, self.calls, self.requests, self.tokens = 0.0, 0.0, 0, 0, 0

    def generate(self, requests: list[GenRequest]) -> list[list[Completion]]:
        start, cpu = time.perf_counter(), time.process_time()
        self.gc_clock.in_engine = True
        out = []
        for r in requests:
            if r.name and r.name.startswith("judge"):
                ids = self.reply
            else:
                ids = (*self.tok.encode(r.user.rsplit(MARK, 1)[1][:-1]), self.end)
            ids = ids[: r.max_tokens]
            out.append([Completion(ids, "stop" if ids[-1] == self.end else "length")])
            self.tokens += len(ids)
        if self.tokens_per_s:
            time.sleep(sum(len(c[0].ids) for c in out) / self.tokens_per_s)
        self.gc_clock.in_engine = False
        self.seconds += time.perf_counter() - start
        self.cpu += time.process_time() - cpu
        self.calls += 1
        self.requests += len(requests)
        return out


def bench(n_texts: int, tokens_per_s: float, seed: int) -> dict:
    config = load_config(start=REPO)
    folder = config.tokenizers_dir.value / "qwen3"
    spec = parse_spec(
        {
            "model": str(folder),
            "model_name": "qwen3-8b",
            "texts": "flores:devtest",
            "sample": n_texts,
            "sequences": ["lit:all"],
            "max_tokens": 1024,
            "seed": seed,
            "judge": {"retries": 0},
        },
        data_dir=config.data_dir.value,
    )
    tok = ChatTokenizer(str(folder), "qwen3-8b")
    tok.hf.chat_template = tok.hf.chat_template or CHAT_TEMPLATE
    start = time.perf_counter()
    tok.chat_batch(["setup"])  # once per tokenizer: the template check and the memoised encoder's tables
    setup = time.perf_counter() - start
    gc_clock = GcClock()
    backend = EchoBackend(TimedTokenizer(tok), tokens_per_s, gc_clock)
    with tempfile.TemporaryDirectory() as tmp:
        gc.callbacks.append(gc_clock)
        start, cpu = time.perf_counter(), time.process_time()
        try:
            result = run_roundtrip(spec, Path(tmp) / "run", backend, backend)
        finally:
            total, cpu = time.perf_counter() - start, time.process_time() - cpu
            gc.callbacks.remove(gc_clock)
    assert result.counts()["judged"] == len(result.samples), result.counts()
    engine = backend.seconds - gc_clock.seconds[True]  # the collector's pauses are orchestration wherever they fall
    overhead = total - engine
    start = time.perf_counter()
    one_by_one = [tok.chat(user) for user, _ in backend.tok.prompts]
    chat_one_s = time.perf_counter() - start
    assert one_by_one == [got for _, got in backend.tok.prompts], "chat_batch differs from chat"
    return {
        "plan": plan_roundtrip(spec),
        "total_s": total,
        "engine_s": engine,
        "overhead_s": overhead,
        "overhead_share": overhead / total,
        "requests": backend.requests,
        "calls": backend.calls,
        "output_tokens": backend.tokens,
        "tokens_per_s": tokens_per_s,
        "chat_s": backend.tok.seconds["chat"],
        "decode_s": backend.tok.seconds["decode"],
        "chat_one_s": chat_one_s,
        "setup_s": setup,
        "overhead_cpu_s": cpu - backend.cpu + gc_clock.seconds[True],  # a pause's wall time ~ its CPU time
        "gc_s": gc_clock.seconds[False],
        "gc_engine_s": gc_clock.seconds[True],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", type=int, default=200)
    ap.add_argument(
        "--tokens-per-s",
        type=float,
        action="append",
        default=None,
        help="simulated batched engine throughput (repeatable; 0 = pure echo)",
    )
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    for rate in args.tokens_per_s or [0.0, 20_000.0]:
        r = bench(args.texts, rate, args.seed)
        p = r["plan"]
        engine = "pure echo" if not rate else f"simulated {rate:,.0f} output tokens/s"
        print(
            f"{p['texts']} texts x {p['sequences']} sequences: {p['chains']} chains, {p['translation_requests']} "
            f"hops in {p['waves']} waves + {p['judge_requests']} judge requests ({r['calls']} generate calls, "
            f"{r['output_tokens']:,} output tokens); engine: {engine}"
        )
        print(
            f"  whole run_roundtrip {r['total_s']:.2f} s | engine calls {r['engine_s']:.2f} s | orchestration "
            f"{r['overhead_s']:.2f} s ({1000 * r['overhead_s'] / r['requests']:.2f} ms per request) | "
            f"overhead / run = {100 * r['overhead_share']:.1f}% (target < 5%)"
        )
        alone = r["overhead_cpu_s"] / (r["overhead_cpu_s"] + r["engine_s"])
        print(
            f"  orchestration CPU time {r['overhead_cpu_s']:.2f} s (wall above it: other processes on the cores); "
            f"CPU orchestration / (that + engine calls) = {100 * alone:.1f}%"
        )
        rest = r["overhead_s"] - r["chat_s"] - r["decode_s"]
        print(
            f"  orchestration split: chat template + prompt encoding {r['chat_s']:.2f} s (chat_batch, one call per "
            f"wave) | decoding {r['decode_s']:.2f} s | everything else (prompts, seeds, Parquet, manifest) {rest:.2f} s"
        )
        print(
            f"  of which garbage collector pauses: {r['gc_s']:.2f} s outside the engine calls, "
            f"{r['gc_engine_s']:.2f} s inside them (moved from engine time to orchestration)"
        )
        print(
            f"  the same {r['requests']} prompts one chat() call each (template rendered, transformers encode): "
            f"{r['chat_one_s']:.2f} s, identical; chat() / chat_batch = {r['chat_one_s'] / r['chat_s']:.1f}x; "
            f"chat_batch's one-time setup per tokenizer (not in the run): {r['setup_s']:.2f} s"
        )


if __name__ == "__main__":
    main()
