"""`mindcap-tok audit`: the ledger audits into one Markdown report and JSON."""

from __future__ import annotations

import click

from ..choices import BACKENDS
from ._options import (
    allow_tokenizer_mismatch_option,
    budgets_option,
    check_n_boot,
    multi_option,
    n_boot_option,
    no_verify_option,
    out_dir_option,
    server_bounds_options,
    task_files_option,
    tokenizer_option,
)
from ._parsing import Command


@click.command("audit", cls=Command)
@click.option("--ledger", required=True, type=click.Path(exists=True, file_okay=False), help="Ledger folder.")
@out_dir_option("Folder for audit.md, audit.json: absent, empty, or an earlier audit.")
@multi_option(
    "--only",
    help="Audits to run: langid comet parser parity normalizer truncation (the default), and determinism (on request).",
)
@multi_option(
    "--premiums",
    "premium_specs",
    help="FLORES premiums: tokenizer name, `premium --format json` file or lang=r (default: each model's).",
)
@click.option("--alt-premiums", multiple=True, help="An alternative normalizer (same forms as --premiums); repeatable.")
@click.option(
    "--renderings",
    type=click.Path(exists=True, dir_okay=False),
    help="English renderings of native traces (JSONL/CSV: lang,item,sample,english) for r_trace.",
)
@budgets_option(
    help="Budget grid for parser and normalizer audits (default 64,...,1024); truncation: those up to each cap "
    "(default: the cap's eighths)."
)
@budgets_option("--translation-budgets", default=[128, 192, 256], help="Budgets for the quality-gain correlation.")
@click.option(
    "--lid-model",
    type=click.Path(exists=True, dir_okay=False),
    help="fastText LID model (GlotLID model.bin); default: GlotLID from the hub, else lid.176.",
)
@click.option("--no-hub", is_flag=True, help="Do not try the Hugging Face hub for GlotLID.")
@click.option("--lid-threshold", type=float, default=0.5, show_default=True, help="Determinate: top probability.")
@click.option("--min-letters", type=int, default=20, show_default=True, help="Determinate: minimum letters.")
@click.option("--delimiter", help="Translation delimiter (regular expression; default: the first blank line).")
@click.option("--comet-checkpoint", type=click.Path(exists=True, dir_okay=False), help="COMET .ckpt (extra comet).")
@click.option("--validation-per-cell", type=int, default=20, show_default=True, help="LID validation sample size.")
@click.option(
    "--validation-labels",
    type=click.Path(exists=True, dir_okay=False),
    help="A returned langid_validation.csv with human_label filled in: report its agreement.",
)
@click.option(
    "--criterion",
    type=float,
    default=90.0,
    show_default=True,
    help="Frozen agreement criterion (percent) for --validation-labels.",
)
@click.option("--adjudicate", is_flag=True, help="langid: ask --judge-model the language of a blind stratified sample.")
@click.option("--judge-model", help="Language-ID judge: a local model folder or Hugging Face id (with --adjudicate).")
@click.option(
    "--judge-backend", type=click.Choice(BACKENDS), help="Judge engine [default: server with a URL, else vllm]."
)
@multi_option("--judge-base-url", help="Judge server URL(s) (OpenAI-compatible; the judge then runs on a server).")
@server_bounds_options
@click.option("--adjudicate-n", type=int, default=20, show_default=True, help="Judged traces per population.")
@click.option("--parity-per-stratum", type=int, default=20, show_default=True, help="Parity sample per stratum.")
@click.option("--sesoi", type=float, default=5.0, show_default=True, help="SESOI in accuracy points.")
@n_boot_option()
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every sample and bootstrap.")
@no_verify_option
@tokenizer_option
@allow_tokenizer_mismatch_option
@task_files_option
@click.pass_obj
def audit_command(state, ledger, out, only, **options) -> None:
    """Run the ledger audits (trace language, translation quality, parser, decoder parity, normalizer,
    truncation)."""
    check_n_boot(options["n_boot"])  # the audits' CIs are at 0.95

    from .._io import check_output_folder
    from ..audits import AuditConfig, LidSettings, run_audits, write_audit_report
    from ..audits._common import find_tasks
    from ..audits.langid import load_validation_labels
    from ..audits.normalizer import load_renderings
    from ..audits.segments import DEFAULT_DELIMITER, check_delimiter
    from ..audits.suite import PRODUCER, audit_inputs, select_audits
    from ..resample import Resampling
    from ..store import Ledger
    from ..tokenization.load import load_tokenizer

    data_dir, toks_dir = state.config.data_dir.value, state.config.tokenizers_dir.value
    # user inputs first: a bad --only, delimiter, labels file or --premiums fails the command before any audit runs
    names = select_audits([o for part in only for o in part.split(",") if o])
    delimiter = check_delimiter(options["delimiter"] or DEFAULT_DELIMITER)
    labels_file, renderings, tokenizer = options["validation_labels"], options["renderings"], options["tokenizer"]
    labels = load_validation_labels(labels_file) if labels_file else None
    check_output_folder(out, PRODUCER)
    find_tasks([], options["tasks"])  # a task file that does not read fails before any audit runs
    judge = _judge(options, names)
    led = Ledger(ledger, verify=not options["no_verify"])
    found = audit_inputs(
        led,
        names,
        premium_specs=options["premium_specs"],
        alt_premiums=options["alt_premiums"],
        tokenizers_dir=toks_dir,
        data_dir=data_dir,
        tasks=options["tasks"],
    )
    for note in found.notes:
        click.echo(f"note: {note}", err=True)
    config = AuditConfig(
        budgets=options["budgets"] or AuditConfig.budgets,
        premiums=found.premiums,
        alternatives=found.alternatives,
        renderings=load_renderings(renderings) if renderings else None,
        references=found.references,
        sources=found.sources,
        comet_checkpoint=options["comet_checkpoint"],
        translation_budgets=options["translation_budgets"],
        lid_model=options["lid_model"],
        lid_hub=not options["no_hub"],
        lid=LidSettings(threshold=options["lid_threshold"], min_letters=options["min_letters"], delimiter=delimiter),
        validation_per_cell=options["validation_per_cell"],
        criterion=options["criterion"] / 100,
        validation_labels=labels,
        lid_judge=judge,
        parity_per_stratum=options["parity_per_stratum"],
        sesoi=options["sesoi"] / 100,
        resampling=Resampling(options["n_boot"], options["seed"]),
        tokenizers_dir=toks_dir,
        allow_tokenizer_mismatch=options["allow_tokenizer_mismatch"],
        tokenizer=load_tokenizer(tokenizer, toks_dir) if tokenizer else None,
        truncation_budgets=options["budgets"] or None,
        tasks=options["tasks"],
    )
    suite = run_audits(led, names, config=config)
    from ..report.audit_page import AUDIT_PAGE, audit_page

    paths = write_audit_report(suite, out, pages={AUDIT_PAGE: audit_page(suite)})
    for res in suite.results:
        note = "ok" if res.status == "ok" else f"skipped: {res.reason}"
        click.echo(f"{res.name}: {note} ({res.summary.get('seconds', 0):.1f} s)", err=True)
    click.echo("wrote " + ", ".join(str(p) for p in paths.values()), err=True)


def _judge(options: dict, names: list[str]):
    """The language-ID judge of ``--adjudicate`` (its backend started), or ``None``; a one-line error for a judge
    option without it, or without ``--judge-model`` or the langid audit."""
    from ..errors import BadInputError

    flags = [
        f
        for f, v in (
            ("--judge-model", options["judge_model"]),
            ("--judge-backend", options["judge_backend"]),
            ("--judge-base-url", options["judge_base_url"]),
            ("--timeout", options["timeout_s"]),
            ("--max-retries", options["max_retries"]),
        )
        if v not in (None, "", ())
    ]
    if not options["adjudicate"]:
        if flags:
            raise BadInputError(f"{', '.join(flags)} only apply with --adjudicate")
        return None
    if "langid" not in names:
        raise BadInputError("--adjudicate judges the langid audit's labels: include langid in --only")
    if not options["judge_model"]:
        raise BadInputError("--adjudicate needs --judge-model (a model folder or Hugging Face id)")
    if options["adjudicate_n"] < 1:
        raise BadInputError(f"--adjudicate-n must be at least 1, got {options['adjudicate_n']}")
    from ..audits.lid_adjudication import LidJudge
    from ..generation import load_backend
    from ..spec import ServerOverrides

    urls = tuple(u for part in options["judge_base_url"] for u in part.split(",") if u)
    name = options["judge_backend"] or ("server" if urls else "vllm")
    if name == "server" and not urls:
        raise BadInputError("--judge-backend server needs --judge-base-url http://HOST:8000/v1")
    server = ServerOverrides(base_url=urls, timeout_s=options["timeout_s"], max_retries=options["max_retries"])
    server.check_backend(name, "the judge")
    model = options["judge_model"]
    backend = load_backend(name, model, tokenizer_name=model, server=server.apply(None))
    return LidJudge(backend, model, per_cell=options["adjudicate_n"])
