"""The faster RL step after the rollout (docs/design.md, "The step's log-probs and update"):
old_logp from the sampler at temperature 1, no forward the step does not need, and the same
update as the reference path (today's step before it, benchmarks/reference_rl_step.py)."""
import copy
from types import SimpleNamespace

import pytest
import torch

from arena.backends.embedded.trainer import fill_logprobs, logprobs_and_update, old_logp_from_sampler
from arena.lm.logprobs import token_logprobs_and_entropy
from arena.lm.model import build_model
from arena.lm.sampler import left_pad, sample_tokens
from arena.po.compose import resolve
from arena.po.types import make_batch
from tests.benchmark_module import load_benchmark

pytestmark = pytest.mark.usefixtures("one_thread")
V = 64  # vocabulary of the test model

# Tolerance of log-probs computed two ways in float32 (a KV-cache decode vs one full forward,
# or micro-batches trimmed differently): the same tiny model (d = 64, 2 layers) sums the same
# products in another order. Each value is O(1) (|log p| <= log 64 ~ 4.2 here), float32's
# epsilon is 1.2e-7, and the few hundred accumulated roundings of a 2-layer forward bound the
# error well under 1e-5 (the benchmark measured <= 2.4e-6 on real rollouts); a wrong row (a
# token shifted by one, another model) differs by > 1e-2 (checked below).
LOGP_ATOL = 1e-5


def _reference_module():
    return load_benchmark("reference_rl_step")


def _cfg(**kw):
    base = dict(temperature=1.0, top_p=1.0, micro_batch_size=256, sort_micro_batches="auto", ppo_num_mini_batches=2,
                ppo_mini_batch_size=None, ppo_epochs=1, kl_coef=0.01, entropy_coef=0.0, grad_clip=1e9)
    return SimpleNamespace(**{**base, **kw})


def _sampled_batch(model, top_p=0.9, seed=0):
    """8 rows: prompts of 3..10 tokens (rows 0 and 1 identical: prefilled once), replies of up to
    6 tokens sampled at temperature 1 by the sampler, which records sampler_logp."""
    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(1, V, (n,), generator=g).tolist() for n in (5, 5, 3, 10, 7, 4, 9, 6)]
    prompts[1] = list(prompts[0])
    out = sample_tokens(model, prompts, temperature=1.0, top_p=top_p, max_new_tokens=6, stop_token_ids=[1],
                        generator=g)
    n, t = len(prompts), max(len(tokens) for tokens, _ in out)
    b = make_batch(group_id=[i // 4 for i in range(n)], traj_id=list(range(n)), turn_idx=[0] * n,
                   turn_reward=[0.0] * n, episode_return=[float(i % 2) for i in range(n)],
                   score=[float(i % 2) for i in range(n)], format_valid=[True] * n, action_valid=[True] * n,
                   won=[bool(i % 2) for i in range(n)])
    b.prompt_ids, b.prompt_mask = left_pad(prompts, 0, "cpu")  # [n, P] each
    b.response_ids = torch.zeros(n, t, dtype=torch.long)  # [n, T]
    b.response_mask = torch.zeros(n, t)  # [n, T]
    b.sampler_logp = torch.zeros(n, t)  # [n, T]
    for i, (tokens, logp) in enumerate(out):
        b.response_ids[i, :len(tokens)] = torch.tensor(tokens)
        b.response_mask[i, :len(tokens)] = 1.0
        b.sampler_logp[i, :len(tokens)] = torch.tensor(logp)
    return b


def _forward_counter(model) -> list:
    # one entry per pass through the model: every pass embeds its tokens once, whether it runs
    # the model's own forward or the trimmed last layer (arena/lm/last_positions.py)
    calls = []
    model.get_input_embeddings().register_forward_hook(lambda *_: calls.append(1))
    return calls


@pytest.mark.parametrize("top_p", [1.0, 0.9])
def test_sampler_logp_equals_a_full_forward_at_temperature_1(top_p):
    # the sampler records log_softmax(logits)[token] without top-p truncation (arena/lm/sampler.py),
    # so at T = 1 its rows are the model's own log-probs, whatever top_p drew them
    torch.manual_seed(0)
    model = build_model(V, size="tiny").eval()
    b = _sampled_batch(model, top_p=top_p)
    with torch.no_grad():
        logp, _ = token_logprobs_and_entropy(model, b.prompt_ids, b.prompt_mask, b.response_ids, b.response_mask)
        other, _ = token_logprobs_and_entropy(build_model(V, size="tiny", seed=1), b.prompt_ids, b.prompt_mask,
                                              b.response_ids, b.response_mask)
    mask = b.response_mask.bool()  # [n, T]
    assert mask.sum() >= 16  # enough tokens to compare
    assert (logp - b.sampler_logp)[mask].abs().max() <= LOGP_ATOL
    assert (other - b.sampler_logp)[mask].abs().max() > 1e-2  # the check can fail


def test_old_logp_from_the_sampler_only_at_temperature_1_and_not_for_empg():
    grpo, empg = resolve({"method": "grpo"}), resolve({"method": "empg"})
    assert old_logp_from_sampler(_cfg(), grpo) and old_logp_from_sampler(_cfg(top_p=0.9), grpo)
    assert not old_logp_from_sampler(_cfg(temperature=0.7), grpo)  # tempered logp are not the policy's
    assert not old_logp_from_sampler(_cfg(), empg)  # EMPG reads the old policy's entropy: a forward


def test_old_from_sampler_runs_no_forward_and_kl_0_none_at_all():
    torch.manual_seed(0)
    model = build_model(V, size="tiny")
    b = _sampled_batch(model)
    calls = _forward_counter(model)
    fill_logprobs(model, None, b, 256, old_from_sampler=True)  # kl_coef = 0: the trainer's ref_model is None
    assert calls == [] and b.entropy is None and b.ref_logp is None
    assert torch.equal(b.old_logp, b.sampler_logp * b.response_mask)  # exactly the sampler's rows
    # the whole step at kl_coef = 0: only the update's own forwards, one pass per mini-batch (8 rows,
    # 2 mini-batches of 4 rows, one micro-batch each); the reference path ran 1 more (old). Rows 0
    # and 1 share a prompt, so mini-batch 1 (3 distinct prompts of 4 <= SHARE_AT_MOST * 4) takes the
    # shared-prompt pass: two model calls (prompts, then replies); mini-batch 2 one: 3 calls
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    logprobs_and_update(_cfg(kl_coef=0.0), resolve({"method": "grpo"}), model, None, opt, b)
    assert len(calls) == 3


def test_empg_still_gets_the_old_policys_entropy():
    torch.manual_seed(0)
    model = build_model(V, size="tiny")
    b = _sampled_batch(model)
    with torch.no_grad():
        logp, ent = token_logprobs_and_entropy(model.eval(), b.prompt_ids, b.prompt_mask, b.response_ids,
                                               b.response_mask)
    b.sampler_logp = torch.zeros_like(b.sampler_logp)  # would show if old_logp came from the sampler
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    metrics = logprobs_and_update(_cfg(), resolve({"method": "empg"}), model, None, opt, b)[0]
    assert b.entropy is not None and (b.entropy - ent).abs().max() <= LOGP_ATOL
    assert (b.old_logp - logp).abs().max() <= LOGP_ATOL and b.old_logp.abs().max() > 0.1
    assert metrics["actor/updates_per_step"] == 2.0


def _params(model) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])  # [n_params]


def test_update_matches_the_reference_path():
    ref_mod = _reference_module()
    po = resolve({"method": "grpo"})
    torch.manual_seed(0)
    start = build_model(V, size="tiny")
    batch = _sampled_batch(start)
    runs = {}
    for name, sort in (("reference", False), ("new, contiguous", False), ("new, sorted", "auto")):
        model = copy.deepcopy(start)
        ref = copy.deepcopy(start).eval().requires_grad_(False)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        b = copy.copy(batch)
        if name == "reference":
            metrics = ref_mod.reference_step(_cfg(), po, model, ref, opt, b)[0]
        else:
            metrics = logprobs_and_update(_cfg(sort_micro_batches=sort), po, model, ref, opt, b)[0]
        runs[name] = (_params(model), b, metrics)
    p_ref, b_ref, m_ref = runs["reference"]
    moved = (p_ref - _params(start)).abs().max()
    assert moved > 1e-4  # the step moved the weights
    for name in ("new, contiguous", "new, sorted"):
        p, b, m = runs[name]
        mask = b.response_mask.bool()  # [n, T]
        assert (b.old_logp - b_ref.old_logp)[mask].abs().max() <= LOGP_ATOL
        # the same reference model on the same micro-batches, but rows 0 and 1 share a prompt (7
        # distinct of 8 <= SHARE_AT_MOST * 8): the new path's shared-prompt pass sums in another order
        assert (b.ref_logp - b_ref.ref_logp)[mask].abs().max() <= LOGP_ATOL
        # SGD moves each weight by lr * grad: a relative gradient error of float rounding (old_logp
        # within LOGP_ATOL enters the loss through the ratio exp(logp - old)) keeps the two far
        # closer than the step itself
        assert (p - p_ref).abs().max() < 1e-3 * moved, name
        assert m["actor/pg_loss"] == pytest.approx(m_ref["actor/pg_loss"], abs=1e-5)
        assert m.keys() == m_ref.keys()


def test_sorted_micro_batches_hold_at_most_64_rows():
    # sorted: min(micro_batch_size, SORTED_MICRO_ROWS = 64); contiguous: micro_batch_size as set
    from arena.backends.embedded.trainer import micro_batch_size, micro_batches_sorted

    assert micro_batch_size(_cfg(micro_batch_size=256), True) == 64
    assert micro_batch_size(_cfg(micro_batch_size=32), True) == 32
    assert micro_batch_size(_cfg(micro_batch_size=256), False) == 256
    # auto follows agg_norm; an explicit value wins
    assert micro_batches_sorted(_cfg(), resolve({"method": "grpo"}))
    assert not micro_batches_sorted(_cfg(), resolve({"method": "grpo", "agg_norm": "per_microbatch"}))
    assert not micro_batches_sorted(_cfg(sort_micro_batches=False), resolve({"method": "grpo"}))
