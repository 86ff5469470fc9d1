"""Behaviour cloning: response-only SFT, cached checkpoints keyed by config,
and the bar: BC with budget=learn's Sokoban settings (the band BC every learning bar starts
from) beats the random-init model by >= 10 points and >= 3 binomial standard errors on >= 256
held-out seeds."""
import json
import math

import pytest
import torch

from arena.bc.train import _encode, bc_dir, bc_hash, collect_demos, ensure_bc_checkpoint, sft, sft_loss
from arena.lm.micro_batches import trim_padding
from arena.lm.model import build_model
from arena.lm.tokenizer import build_tokenizer
from arena.config import load_config


def test_bc_hash_covers_every_bc_input_and_no_rl_key():
    base = load_config([])
    assert bc_hash(base) == bc_hash(load_config(["po.method=gspo", "lr=0.5", "steps=7", "kl_coef=0.5", "eval.n=8"]))
    for change in ("bc.steps=5", "model.size=small", "env.kwargs.dim=6", "env=tir_math", "model.tokenizer=word",
                   "seed=3", "bc.band=[0.2,0.3]", "bc.val_n=64", "env.max_new_tokens=9", "eval.temperature=1.0"):
        assert bc_hash(load_config([change])) != bc_hash(base), change


def test_bc_keys_added_later_leave_earlier_checkpoints_their_hash():
    # bc.pad_per_batch came after BC checkpoints existed: at its default (false) it is left out of
    # the key, so a cached checkpoint is found again. 711a59c589493bca is Sokoban budget=default's
    # BC hash at the commit before the key (computed there): the tiny model's band BC, which is
    # budget=stress's now that Sokoban's default trains budget=learn's (configs/env_budget/sokoban_default.yaml).
    assert bc_hash(load_config(["budget=stress"])) == "711a59c589493bca"
    assert bc_hash(load_config(["budget=stress", "bc.pad_per_batch=false"])) == "711a59c589493bca"
    assert bc_hash(load_config(["budget=stress", "bc.pad_per_batch=true"])) != "711a59c589493bca"


def test_demos_are_won_expert_episodes_in_the_prompt_format():
    cfg = load_config(["env=sanity"])
    pairs, success = collect_demos(cfg, 12)
    assert success == 1.0 and len(pairs) == 12  # one turn per sanity episode
    prompt, response = pairs[0]
    assert prompt.startswith("Observation: cue ") and response.startswith("<think>plan</think><action>")


def test_sft_loss_is_on_response_tokens_only():
    # L = -(1/R) sum over response tokens of log p(y_t | prompt, y_<t), R = number of response
    # tokens. Recompute it from one plain forward pass over each unpadded prompt++response:
    # the logits at position P-1+t predict response token t; prompt positions are never targets.
    cfg = load_config(["env=sanity"])
    pairs, _ = collect_demos(cfg, 6)
    tok = build_tokenizer([p + r for p, r in pairs], kind="wordlevel", vocab_size=64)
    model = build_model(len(tok), size="tiny", pad_token_id=tok.pad_token_id)
    loss = sft_loss(model, *_encode(tok, pairs))
    nll, count = 0.0, 0
    with torch.no_grad():
        for prompt, response in pairs:
            p = tok.encode(prompt, add_special_tokens=False)
            r = tok.encode(response, add_special_tokens=False)
            logp = torch.log_softmax(model(torch.tensor([p + r])).logits[0], -1)  # [P+T, V]
            nll -= sum(logp[len(p) - 1 + t, r[t]].item() for t in range(len(r)))
            count += len(r)
    assert loss.item() == pytest.approx(nll / count, abs=1e-5)
    losses = sft(model, tok, pairs, steps=5, lr=1e-2, batch_size=6, seed=0, log=lambda *_: None)
    assert losses[-1] < losses[0]


def test_padding_per_batch_keeps_every_real_token_and_the_loss():
    # Four pairs with prompts of 1, 2, 3, 6 words and replies of 1, 1, 2, 4 words: the demo set pads
    # to P = 6 and T = 4. Rows {0, 2} need only P' = 3 (row 2's prompt) and T' = 2 (row 2's reply):
    # trimming drops the 3 leading prompt columns and the 2 trailing reply columns, which are
    # padding in both rows, and keeps the 1 + 3 prompt and 1 + 2 reply tokens. Position ids count
    # real tokens and padding is masked, so the loss is the same up to float rounding.
    pairs = [("a", "x"), ("a b", "y"), ("a b c", "x y"), ("a b c d e f", "x y z x")]
    tok = build_tokenizer([p + " " + r for p, r in pairs], kind="wordlevel", vocab_size=64)
    model = build_model(len(tok), size="tiny", pad_token_id=tok.pad_token_id)
    p_ids, p_mask, r_ids, r_mask = _encode(tok, pairs)
    assert p_ids.shape == (4, 6) and r_ids.shape == (4, 4)
    rows = torch.tensor([0, 2])
    batch = (p_ids[rows], p_mask[rows], r_ids[rows], r_mask[rows])
    trimmed = trim_padding(*batch)
    assert trimmed[0].shape == (2, 3) and trimmed[2].shape == (2, 2)
    assert trimmed[1].sum() == batch[1].sum() == 4 and trimmed[3].sum() == batch[3].sum() == 3
    assert torch.equal(trimmed[0][trimmed[1].bool()], batch[0][batch[1].bool()])  # the same tokens, in order
    with torch.no_grad():
        assert sft_loss(model, *trimmed).item() == pytest.approx(sft_loss(model, *batch).item(), abs=1e-6)
    # the whole set is already as short as its longest row: nothing to trim
    assert [t.shape for t in trim_padding(p_ids, p_mask, r_ids, r_mask)] == [t.shape for t in (p_ids, p_mask, r_ids, r_mask)]
    losses = sft(model, tok, pairs, steps=5, lr=1e-2, batch_size=2, seed=0, log=lambda *_: None, pad_per_batch=True)
    assert losses[-1] < losses[0]


def test_bc_checkpoint_is_cached(tmp_path):
    cfg = load_config(["env=sanity", "budget=sanity", f"results_dir={tmp_path}", "bc.steps=2"])
    path = ensure_bc_checkpoint(cfg, log=lambda *_: None)
    assert (path / "config.json").exists() and (path / "tokenizer.json").exists()
    report = json.loads((bc_dir(cfg) / "bc.json").read_text())
    assert {"demo_turns", "demo_episodes", "demo_episodes_won", "eval_success", "eval_format_valid", "eval_n"} <= set(report)
    # budget=sanity plays bc.demos=64 one-turn episodes: the kept turns are the won episodes
    assert report["demo_episodes"] == 64 and report["demo_turns"] == report["demo_episodes_won"] <= 64
    stamp = (path / "config.json").stat().st_mtime_ns
    logs = []
    assert ensure_bc_checkpoint(cfg, log=logs.append) == path and logs == []  # no retraining
    assert (path / "config.json").stat().st_mtime_ns == stamp


def test_rejection_sampling_bc_keeps_the_won_rollouts_of_a_given_model(tmp_path):
    expert = load_config(["env=sanity", "budget=sanity", f"results_dir={tmp_path}", "bc.steps=40", "bc.eval_n=32"])
    path = ensure_bc_checkpoint(expert, log=lambda *_: None)
    base = json.loads((bc_dir(expert) / "bc.json").read_text())
    rej = load_config(["env=sanity", "budget=sanity", f"results_dir={tmp_path}", f"model.path={path}",
                       "bc.source=rejection", "bc.demos=64", "bc.steps=20", "bc.eval_n=32"])
    assert bc_dir(rej) != bc_dir(expert)
    ensure_bc_checkpoint(rej, log=lambda *_: None)
    report = json.loads((bc_dir(rej) / "bc.json").read_text())
    # one turn per sanity episode: the kept demos are exactly the won rollouts
    assert report["demo_turns"] == report["demo_episodes_won"] == round(report["expert_success"] * 64) > 0
    assert report["demo_episodes"] == 64
    assert report["eval_success"] >= base["eval_success"] - 0.1  # filtered self-training doesn't wreck it
    with pytest.raises(ValueError, match="set model.path"):
        ensure_bc_checkpoint(load_config(["env=sanity", f"results_dir={tmp_path}", "bc.source=rejection"]))


@pytest.mark.slow
def test_bc_beats_the_random_init_model_on_sokoban(tmp_path):
    # n = 256 held-out seeds, greedy. SE = sqrt(p_bc(1-p_bc)/n + p_0(1-p_0)/n).
    # budget=learn's band BC (hidden 96) stops at SFT step 320 on seed 0 (its first two band
    # checks), ~1.5 min; the tiny model's band BC (budget=stress) stops at step 660, 4-7 min in the slow stage's
    # serial unit (docs/testbed.md, "The slow stage on two workers"). The bar is the same.
    n = 256
    bc = load_config(["budget=learn", f"results_dir={tmp_path}", f"bc.eval_n={n}"])
    rand = load_config(["budget=learn", f"results_dir={tmp_path}", f"bc.eval_n={n}", "bc.steps=0"])
    p_bc = json.loads((ensure_bc_checkpoint(bc, log=print).parent / "bc.json").read_text())["eval_success"]
    p_0 = json.loads((ensure_bc_checkpoint(rand, log=print).parent / "bc.json").read_text())["eval_success"]
    se = math.sqrt(p_bc * (1 - p_bc) / n + p_0 * (1 - p_0) / n)
    print(f"BC {p_bc:.3f} vs random init {p_0:.3f}, SE {se:.4f}")
    assert p_bc - p_0 >= 0.10 and p_bc - p_0 >= 3 * se
