"""`lm-eval`: lm-evaluation-harness tasks through abricot-local's model."""

from __future__ import annotations

import click

from abricot_local.cli.app import cli, echo
from abricot_local.errors import UsageError


@cli.command("lm-eval", context_settings={"ignore_unknown_options": True, "allow_extra_args": True,
                                          "allow_interspersed_args": False})
@click.option("--tasks-path", is_flag=True,
              help="Print the folder of abricot-local's lm-eval tasks (for `lm-eval run --include_path`) and exit.")
@click.argument("model", required=False)
@click.argument("lm_eval_args", nargs=-1, type=click.UNPROCESSED, metavar="[LM-EVAL OPTIONS]...")
def lm_eval(tasks_path: bool, model: str | None, lm_eval_args: tuple[str, ...]) -> None:
    """Run lm-evaluation-harness tasks on MODEL (a registry alias or a .gguf path).

    Everything after MODEL goes to `lm-eval run` unchanged (--tasks, --include_path,
    --num_fewshot, --limit, --output_path, --log_samples, --batch_size, --apply_chat_template,
    ...); backend options go in --model_args, as `run`'s flags (n_ctx=4096,engine=prefix,...).
    abricot-local's own tasks (abricot_paper, abricot_calamita, discotex_card, discotex_itabench)
    are found without --include_path. Needs: pip install "abricot-local[lm-eval]"."""
    if tasks_path:
        from abricot_local.lm_eval.tasks import TASKS_PATH

        echo(str(TASKS_PATH))
        return
    if not model:
        raise UsageError("abricot-local lm-eval needs MODEL (a registry alias or a .gguf path), then --tasks NAME")
    try:
        from abricot_local.lm_eval.model import run_cli
    except ModuleNotFoundError as err:
        if not (err.name or "").startswith("lm_eval"):
            raise
        raise UsageError('lm-eval is not installed: pip install "abricot-local[lm-eval]"') from None
    run_cli(model, lm_eval_args)
