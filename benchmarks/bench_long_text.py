"""Benchmark: the encode paths that guard against regex-engine limits (``tokenization.long_text``) on normal text.

Every encode entry point checks the length of each text first and sends texts over ``SAFE_CHARS`` characters
pre-token by pre-token. On normal text (FLORES-200 devtest lines of several scripts, all under the limit) this
must cost nothing measurable: each path is timed against the code it ran before the check (the bare library call,
or the tiktoken engine's own normalising), on the same lines, alternating, best of ``--repeat`` runs, and both
must give the same ids. A second part times texts over the limit
(FLORES lines joined into one text of about 150,000 characters, which the library still encodes) against the
library, and the reproducer the library gives up on (10.5 M spaces before a letter) alone.

    python benchmarks/bench_long_text.py [--model qwen3-8b] [--repeat 7] [--langs 12] [--panic]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from mindcap_tok.config import load_config
from mindcap_tok.data.flores import load_flores
from mindcap_tok.data.languages import flores_codes
from mindcap_tok.tokenization.load import load_tokenizer
from mindcap_tok.tokenization.tiktoken_engine import TiktokenEngine


def best(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    """Fastest of ``repeat`` runs and the last result."""
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def compare(label: str, guarded: Callable[[], object], bare: Callable[[], object], repeat: int) -> None:
    """Time both paths alternately (so machine load hits both alike) and check they agree."""
    g_times, b_times, g_out, b_out = [], [], None, None
    for _ in range(repeat):
        tg, g_out = best(guarded, 1)
        tb, b_out = best(bare, 1)
        g_times.append(tg)
        b_times.append(tb)
    same = g_out == b_out if not hasattr(g_out, "tolist") else g_out.tolist() == list(b_out)
    g, b = min(g_times), min(b_times)
    print(f"{label:<44} guarded {g:8.3f} s   bare {b:8.3f} s   ratio {g / b:5.3f}   same ids: {same}")


def engine_bare(engine: TiktokenEngine, texts: list[str]) -> list[list[int]]:
    """The tiktoken engine's ``encode_batch`` on texts without added tokens, without the long-text check."""
    assert engine._added_re is None or not engine._added_re.search("\x00".join(texts))
    return engine.enc.encode_ordinary_batch([engine._normalize(t) for t in texts])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="qwen3-8b", help="a tokenizer.json model of the registry")
    ap.add_argument("--tiktoken-model", default="gpt-4o", help="a tiktoken model of the registry")
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--langs", type=int, default=12, help="FLORES languages (every 204/langs-th code)")
    ap.add_argument("--panic", action="store_true", help="also time the 10.5 M-space reproducer (about a minute)")
    args = ap.parse_args()
    cfg = load_config()
    flores = str(cfg.data_dir.value / "flores200")
    codes = flores_codes()[:: max(1, len(flores_codes()) // args.langs)][: args.langs]
    lines = [s for code in codes for s in load_flores(code, "devtest", source=flores)]
    print(f"{len(lines):,} FLORES devtest lines of {len(codes)} languages, {sum(map(len, lines)):,} characters")

    tok = load_tokenizer(args.model, cfg.tokenizers_dir.value)
    hf = tok.tokenizer
    compare(
        f"{args.model} encode_batch",
        lambda: tok.encode_batch(lines),
        lambda: [e.ids for e in hf.encode_batch(lines, add_special_tokens=False)],
        args.repeat,
    )
    compare(
        f"{args.model} count_tokens",
        lambda: tok.count_tokens(lines),
        lambda: np.fromiter(
            (len(e.ids) for e in hf.encode_batch_fast(lines, add_special_tokens=False)), np.int64, count=len(lines)
        ),
        args.repeat,
    )
    some = lines[:2000]
    compare(
        f"{args.model} encode, one line at a time",
        lambda: [tok.encode(t) for t in some],
        lambda: [hf.encode(t, add_special_tokens=False).ids for t in some],
        args.repeat,
    )
    engine = tok.tiktoken_engine
    if engine is not None:
        compare(
            f"{args.model} tiktoken engine",
            lambda: engine.encode_batch(lines),
            lambda: engine_bare(engine, lines),
            args.repeat,
        )
    tt = load_tokenizer(args.tiktoken_model, cfg.tokenizers_dir.value)
    compare(
        f"{args.tiktoken_model} encode_batch",
        lambda: tt.encode_batch(lines),
        lambda: tt.backend.enc.encode_ordinary_batch(lines),
        args.repeat,
    )

    joined = " ".join(lines)
    long_texts = [joined[k : k + 150_000] for k in range(0, min(len(joined), 1_500_000), 150_000)]
    print(f"\n{len(long_texts)} texts of 150,000 characters (over the limit; the library still copes)")
    tok.encode_batch(long_texts[:1])  # the memoised encoder is built once per tokenizer: not timed
    compare(
        f"{args.model} encode_batch, long texts",
        lambda: tok.encode_batch(long_texts),
        lambda: [e.ids for e in hf.encode_batch(long_texts, add_special_tokens=False)],
        args.repeat,
    )
    compare(
        f"{args.tiktoken_model} encode_batch, long texts",
        lambda: tt.encode_batch(long_texts),
        lambda: tt.backend.enc.encode_ordinary_batch(long_texts),
        args.repeat,
    )
    if args.panic:
        text = " " * 10_500_000 + "a"
        t, ids = best(lambda: tok.encode(text), 1)
        print(f"\n{args.model}: 10.5 M spaces then a letter (the library gives up): {t:.1f} s, {len(ids):,} ids")


if __name__ == "__main__":
    main()
