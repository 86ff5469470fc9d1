"""A verl run's policy as Hugging Face model folders, the run folder's `steps/<step>/` and
`policy/` (docs/design.md, Run folder; arena/runs/policy.py).

verl writes the HF folder itself: with `hf_model` in `actor.checkpoint.save_contents`
(`HF_SAVE_CONTENTS`), its FSDP checkpoint manager gathers the full actor on rank 0 at each
checkpoint and `save_pretrained`s it, with the model config and the tokenizer, to
`<ckpt>/global_step_<k>/actor/huggingface/`. Resuming loads only the sharded state
(`RESUME_LOAD_CONTENTS`), as without it. `export_step` then hard-links that folder to
`<run>/steps/<k>/` (arena.runs.policy.link_tree: atomic, a copy where links are not possible,
so the folder outlives verl's checkpoint rotation), with config.json's dtype set to the stored
weights' (`dtype_as_stored`), and `export_final` the last one to `<run>/policy/` (after any
saved step a kill left unexported: `export_missing_steps`). Importing
this module imports neither verl nor torch.
"""
from __future__ import annotations

import json
from pathlib import Path

from arena.runs import RunFolder
from arena.runs.layout import HF_CONFIG_FILE
from arena.runs.policy import link_tree

HF_SAVE_CONTENTS = ["model", "optimizer", "extra", "hf_model"]
RESUME_LOAD_CONTENTS = ["model", "optimizer", "extra"]
TRACKER_FILE = "latest_checkpointed_iteration.txt"  # verl's record of its last complete checkpoint


def checkpoint_step(ckpt_dir: Path) -> int:
    """The step verl resumes from (its latest_checkpointed_iteration.txt), -1 without one: then
    the run restarts from scratch and every metrics row of an earlier attempt is dropped."""
    tracker = Path(ckpt_dir) / TRACKER_FILE
    return int(tracker.read_text().strip()) if tracker.exists() else -1


def verl_hf_folder(ckpt_dir: Path, step: int) -> Path:
    """Where verl's checkpoint of `step` holds the actor as an HF model folder."""
    return Path(ckpt_dir) / f"global_step_{int(step)}" / "actor" / "huggingface"


def export_step(ckpt_dir: Path, run: RunFolder, step: int) -> Path:
    """<run>/steps/<step>/ from verl's checkpoint of `step` (ValueError when it holds no HF
    weights: a checkpoint saved without `hf_model`), its config's dtype set to the weights'
    (`dtype_as_stored`)."""
    return link_tree(verl_hf_folder(ckpt_dir, step), run.step_policy(step), edit=dtype_as_stored)


# safetensors dtype names -> transformers' config `dtype`
SAFETENSORS_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16"}


def dtype_as_stored(folder: Path) -> None:
    """verl's manager builds the saved model with dtype bfloat16, so config.json says "bfloat16"
    while the weights it writes are the FSDP master weights (float32); `from_pretrained(folder)`
    reads the config's dtype and would load the trained policy rounded to bfloat16. The copy's
    config.json (a new file, not the link to verl's) gets the dtype of the stored weights."""
    from safetensors import safe_open

    index = folder / "model.safetensors.index.json"
    weights = folder / (next(iter(json.loads(index.read_text())["weight_map"].values()))
                        if index.is_file() else "model.safetensors")
    if not weights.is_file():
        return  # pytorch_model.bin: the config stays as verl wrote it
    with safe_open(str(weights), framework="pt") as fh:
        stored = SAFETENSORS_DTYPES.get(fh.get_slice(next(iter(fh.keys()))).get_dtype())
    config_file = folder / HF_CONFIG_FILE
    config = json.loads(config_file.read_text())
    if stored is None or config.get("dtype") == stored:
        return
    config["dtype"] = stored
    config_file.unlink()  # a hard link to verl's file: replace it, leave verl's as it is
    config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def export_missing_steps(ckpt_dir: Path, run: RunFolder) -> list[int]:
    """Export every complete verl checkpoint (step <= the tracker's, still on disk) that has no
    <run>/steps/<k>/ yet: a kill between verl's save and its export leaves one, and the resumed
    run never saves that step again. The steps exported, ascending."""
    last = checkpoint_step(ckpt_dir)
    done = []
    for folder in sorted(Path(ckpt_dir).glob("global_step_*"), key=lambda p: p.name):
        step = folder.name.removeprefix("global_step_")
        if not step.isdigit() or int(step) > last or (run.step_policy(int(step)) / HF_CONFIG_FILE).is_file():
            continue
        export_step(ckpt_dir, run, int(step))
        done.append(int(step))
    return sorted(done)


def export_final(ckpt_dir: Path, run: RunFolder) -> Path:
    """<run>/policy/ from verl's last checkpoint (the run's last step: verl always saves it when
    save_freq > 0, and arena's save_freq is >= 1), after exporting the saved steps not exported
    yet (`export_missing_steps`)."""
    step = checkpoint_step(ckpt_dir)
    if step < 0:
        raise ValueError(f"{ckpt_dir} holds no verl checkpoint ({TRACKER_FILE} is missing): no final policy to export")
    export_missing_steps(ckpt_dir, run)
    return link_tree(run.step_policy(step), run.policy)
