"""`mindcap-tok render --ledger L --model M --out-dir DIR`: English renderings of native traces for `audit`."""

from __future__ import annotations

import click

from ..choices import BACKENDS
from ._options import multi_option, no_verify_option, out_dir_option, server_bounds_options
from ._parsing import Command


@click.command("render", cls=Command)
@click.option("--ledger", required=True, type=click.Path(exists=True, file_okay=False), help="Ledger folder.")
@out_dir_option("Render folder (waves, renderings.jsonl); a rerun resumes at the first missing wave.")
@click.option("--model", required=True, help="Translator: model folder or HF id.")
@click.option("--model-name", default=None, help="The translator's name (tokenizer registry) [default: folder name].")
@click.option(
    "--backend",
    type=click.Choice(BACKENDS),
    default=None,
    help="Engine of the translator [default: server when --base-url is given, else vllm].",
)
@multi_option("--base-url", "base_url", metavar="URL", help="OpenAI-compatible server(s) for the server backend.")
@server_bounds_options
@click.option("--prompts", default=None, help="Prompt: a shipped version (render-v1) or a JSON file with 'translate'.")
@click.option("--max-tokens", type=click.IntRange(min=1), default=4096, show_default=True, help="Cap per rendering.")
@click.option("--wave-size", type=click.IntRange(min=1), default=64, show_default=True, help="Traces per wave.")
@click.option(
    "--temperature", type=click.FloatRange(min=0), default=0.0, show_default=True, help="Sampling (0: greedy)."
)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed every request's seed derives from.")
@click.option("--keep-capped", is_flag=True, help="Also write renderings that hit the cap (cut: r_trace biased up).")
@no_verify_option
@click.pass_obj
def render_command(state, ledger, out, model, model_name, backend, base_url, prompts, **options) -> None:
    """Translate the native traces of LEDGER into English (waves, resumable), writing DIR/renderings.jsonl for
    `mindcap-tok audit --renderings` (the same-content trace premium r_trace)."""
    from pathlib import Path

    from ..generation import load_backend
    from ..roundtrip.render import DEFAULT_PROMPTS, RenderSpec, greedy_sampling, load_prompt, render_traces
    from ..spec import ServerOverrides
    from ..store import Ledger

    name = model_name or Path(model).name
    spec = RenderSpec(
        translator=name,
        prompts=prompts or DEFAULT_PROMPTS,
        max_tokens=options["max_tokens"],
        wave_size=options["wave_size"],
        seed=options["seed"],
        keep_capped=options["keep_capped"],
        sampling=greedy_sampling(options["temperature"]),
    )
    load_prompt(spec.prompts)  # a bad prompts file is refused before the ledger is read or the model loaded
    engine = backend or ("server" if base_url else "vllm")
    server = ServerOverrides(
        base_url=tuple(base_url), timeout_s=options["timeout_s"], max_retries=options["max_retries"]
    )
    server.check_backend(engine, "the translator")
    records = Ledger(ledger, verify=not options["no_verify"]).read()
    back = load_backend(engine, model, tokenizer_name=name, seed=spec.seed, server=server.apply(None))
    result = render_traces(
        records, out, back, spec=spec, on_wave=lambda wave, n: click.echo(f"{wave}: {n} renderings", err=True)
    )
    click.echo(
        f"rendered {result.kept} of {result.traces} native traces into {result.out_dir / 'renderings.jsonl'} "
        f"({result.capped} hit the cap, {result.empty} empty); {len(result.skipped)} waves were done",
        err=True,
    )
