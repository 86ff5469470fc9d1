"""The verl run's policy as HF model folders (arena/backends/verl/policy_export.py): verl's own
FSDP checkpoint manager, asked for `hf_model` as the run's verl config asks, writes the actor's HF
folder; the export links it to `<run>/steps/<k>/` and `<run>/policy/`. Here verl's manager runs
for real on a tiny model (one CPU process, gloo, FSDP2 as a CPU run shards), in about a second
after verl's import; the end-to-end verl run is the slow tests' (tests/verl/test_verl_cpu_e2e.py)."""
import json
import os

import pytest
import torch

pytest.importorskip("verl")

from arena.backends.verl.policy_export import (HF_SAVE_CONTENTS, RESUME_LOAD_CONTENTS, export_final,  # noqa: E402
                                                export_missing_steps, export_step, verl_hf_folder)
from arena.runs import RunFolder  # noqa: E402
from arena.runs.policy import policy_folder, saved_steps  # noqa: E402


def _tiny_model_and_tokenizer():
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from arena.lm.tokenizer import build_tokenizer

    tok = build_tokenizer(["<action>push up</action> push down left right"], kind="wordlevel", vocab_size=64)
    cfg = Qwen3Config(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, head_dim=8, tie_word_embeddings=True,
                      pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                      architectures=["Qwen3ForCausalLM"])  # as a config loaded from a folder (verl's actor) has
    torch.manual_seed(0)
    return Qwen3ForCausalLM(cfg).float(), tok


@pytest.fixture
def gloo_group(tmp_path):
    """A one-process gloo group for verl's checkpoint manager, torn down after the test."""
    import torch.distributed as dist

    if dist.is_initialized():
        pytest.skip("a process group is already initialised in this process")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def _verl_save(model, tok, ckpt_dir, step):
    """What verl's trainer does at a checkpoint: the actor's FSDP manager saves global_step_<k>/actor
    with the run's save_contents, then verl writes its tracker file."""
    from verl.trainer.config import CheckpointConfig
    from verl.utils.checkpoint.fsdp_checkpoint_manager import FSDPCheckpointManager

    manager = FSDPCheckpointManager(model, torch.optim.AdamW(model.parameters(), lr=1e-3), lr_scheduler=None,
                                    processing_class=tok,
                                    checkpoint_config=CheckpointConfig(save_contents=list(HF_SAVE_CONTENTS)))
    manager.save_checkpoint(str(ckpt_dir / f"global_step_{step}" / "actor"), global_step=step)
    (ckpt_dir / "latest_checkpointed_iteration.txt").write_text(str(step))


def test_verl_checkpoint_exports_as_hf_folders(tmp_path, gloo_group):
    from torch.distributed.fsdp import fully_shard
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, tok = _tiny_model_and_tokenizer()
    want = {k: v.clone() for k, v in model.state_dict().items()}
    fully_shard(model)
    run = RunFolder(tmp_path / "run").create()
    (run.config_file).write_text("seed: 0\n")
    _verl_save(model, tok, run.ckpt, 2)
    with torch.no_grad():  # a different policy at the last step
        for p in model.parameters():
            p.add_(0.5)
    _verl_save(model, tok, run.ckpt, 3)

    # step 2 is not exported (a kill right after verl's save); the final export catches it up.
    # A checkpoint past the tracker's step is one a kill cut short: never exported
    verl_hf_folder(run.ckpt, 4).mkdir(parents=True)
    (verl_hf_folder(run.ckpt, 4) / "config.json").write_text("{}")
    assert export_final(run.ckpt, run) == run.policy
    assert saved_steps(run.path) == [2, 3] and policy_folder(run.path) == run.policy
    assert export_missing_steps(run.ckpt, run) == []  # nothing left to export
    # hard links to verl's files: the weights are on disk once, and outlive verl's checkpoint rotation
    for name in ("model.safetensors", "tokenizer.json"):
        verl_file = verl_hf_folder(run.ckpt, 3) / name
        assert os.path.samefile(run.policy / name, verl_file) and os.path.samefile(run.step_policy(3) / name, verl_file)
    # transformers' Auto classes load both; nothing in them asks for custom (arena) code
    for step, offset in ((2, 0.0), (3, 0.5)):
        folder = run.step_policy(step)
        config = json.loads((folder / "config.json").read_text())
        # verl's config.json says bfloat16 over float32 weights; the export's says what is stored,
        # so from_pretrained's default ("auto": the config's dtype) loads the trained weights exactly
        assert "auto_map" not in config and config["dtype"] == "float32"
        assert json.loads((verl_hf_folder(run.ckpt, step) / "config.json").read_text())["dtype"] == "bfloat16"
        loaded = AutoModelForCausalLM.from_pretrained(folder)
        assert loaded.dtype == torch.float32
        for key, value in want.items():
            assert torch.allclose(loaded.state_dict()[key], value + offset, rtol=0, atol=1e-6), (step, key)
    loaded_tok = AutoTokenizer.from_pretrained(run.policy)
    text = "<action>push up</action>"
    assert loaded_tok.encode(text, add_special_tokens=False) == tok.encode(text, add_special_tokens=False)


def test_a_checkpoint_without_hf_weights_is_refused(tmp_path):
    # verl's default save_contents (no hf_model) leaves only config and tokenizer in huggingface/
    run = RunFolder(tmp_path / "run").create()
    hf = verl_hf_folder(run.ckpt, 1)
    hf.mkdir(parents=True)
    (hf / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="not a complete HF model folder: no model.safetensors"):
        export_step(run.ckpt, run, 1)
    assert not run.step_policy(1).exists()
    with pytest.raises(ValueError, match="holds no verl checkpoint"):
        export_final(tmp_path / "empty", run)


def test_the_run_config_asks_verl_for_hf_weights_and_resumes_from_shards():
    from arena.backends.verl.verl_config import build_verl_config
    from arena.config import load_config

    checkpoint = build_verl_config(load_config(["backend=verl"])).actor_rollout_ref.actor.checkpoint
    assert list(checkpoint.save_contents) == ["model", "optimizer", "extra", "hf_model"]
    assert list(checkpoint.load_contents) == list(RESUME_LOAD_CONTENTS) == ["model", "optimizer", "extra"]
