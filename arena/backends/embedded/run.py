"""`arena train` for the embedded backend: config -> run folder -> BC init -> RL -> summary.

A failure writes error.txt (with the traceback) into the run folder and exits 1; the run
folder of a finished run (a valid summary.json) is not trained again; an invalid one is moved
aside and the run resumes from its checkpoint (docs/design.md, Run folder)."""
from __future__ import annotations

import traceback

from arena.backends import check_trainable
from arena.config import cell_id
from arena.runs import RunFolder
from arena.runs.layout import run_dir
from arena.runs.stability import smoke_note
from arena.cli_errors import EXIT_FAILED, EXIT_OK, print_bad_input
from arena.runs.wandb_log import init_wandb


def run_training(cfg, log=print) -> int:
    import torch

    # lazy: keeps numpy, tokenizers, torch, transformers out of this module's import
    from arena.bc.train import load_initial_model
    from arena.lm.checkpoint import BadCheckpoint

    # lazy: keeps numpy, tokenizers, torch, transformers out of this module's import
    from .trainer import train

    check_trainable(cfg)
    run = RunFolder(run_dir(cfg))
    if run.start(log):
        return EXIT_OK
    run.create()
    torch.manual_seed(cfg.seed)
    wb = None
    try:
        model, tokenizer = load_initial_model(cfg, log=log)
        wb = init_wandb(cfg, cell_id(cfg), run.path)
        summary = train(cfg, run, model, tokenizer, wandb_run=wb, log=log)
    except BadCheckpoint as error:  # a state file that needs more than tensors: never unpickled
        run.write_error(f"{error}\n")
        return print_bad_input("train", error)
    except Exception:
        run.write_error(traceback.format_exc())
        log(f"[train] failed; traceback in {run.error_file}")
        return EXIT_FAILED
    finally:
        if wb is not None:
            wb.finish()
    log(f"[train] {summary['status']}: final eval success {summary['final_eval_success']} -> {run.summary_file}"
        f"{smoke_note(cfg.get('budget'), summary['status'])}")
    return EXIT_OK
