"""The current sampler and eval against the code before the speed work (benchmarks/reference_sampler.py,
the "before" of benchmarks/bench_eval.py and bench_sampler.py): the same greedy eval outcomes and
tokens, and the same tokens and log-probs from the same seed when sampling."""
import pytest
import torch

import arena.lm.evaluate as current_eval
from arena.bc.train import collect_demos, fresh_model, sft
from arena.config import load_config
from arena.lm.model import build_model
from arena.lm.sampler import StopStrings, make_policy, sample_tokens
from arena.lm.tokenizer import build_tokenizer
from tests.benchmark_module import load_benchmark
from tests.lm.last_layer_mlp import last_layer_mlp_widths

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def bench_eval():
    return load_benchmark("bench_eval")


@pytest.fixture(scope="module")
def sokoban_policy():
    """A tiny Sokoban model BC'd for 80 steps on 24 expert episodes: a few greedy wins."""
    cfg = load_config(["env=sokoban", "budget=default", "eval.n=32"])
    pairs, _ = collect_demos(cfg, 24)
    model, tokenizer = fresh_model(cfg, pairs)
    sft(model, tokenizer, pairs, steps=80, lr=3e-3, batch_size=32, seed=0, log=lambda *a: None)
    return cfg, model.eval(), tokenizer


def test_greedy_eval_plays_the_same_episodes_as_the_reference(bench_eval, sokoban_policy):
    cfg, model, tokenizer = sokoban_policy
    ref = bench_eval.reference_sampler
    _, ref_result, ref_tokens = bench_eval.timed_eval(ref, ref.make_policy, model, tokenizer, cfg, 32)
    _, new_result, new_tokens = bench_eval.timed_eval(current_eval, make_policy, model, tokenizer, cfg, 32)
    # every turn's response ids, in the order the rollout asked for them, and every outcome
    assert new_tokens == ref_tokens
    assert new_result == ref_result
    assert sum(len(turn) for turn in new_tokens) >= 32  # at least one turn per episode was compared
    assert 0 < sum(new_result["wins"]) < 32, "the comparison should include won and lost episodes"


@pytest.mark.parametrize("temperature,top_p", [(1.0, 1.0), (0.7, 0.9), (0.0, 1.0)])
def test_sampling_draws_the_reference_tokens_and_logp_from_the_same_seed(bench_eval, temperature, top_p):
    moves = ["left", "up", "down", "right"] * 4
    corpus = [f"map {i}\n#_OX#\n<think>push box {d}</think><action>{d}</action>" for i, d in enumerate(moves)]
    tok = build_tokenizer(corpus, vocab_size=280)
    model = build_model(len(tok), size="tiny", seed=3, tie_word_embeddings=False)
    prompts = [tok.encode(f"map {i}\n#_OX#\n", add_special_tokens=False) for i in (1, 2, 3, 1, 5, 22)]
    kwargs = dict(temperature=temperature, top_p=top_p, max_new_tokens=10, stop_token_ids=[tok.eos_token_id],
                  pad_token_id=tok.pad_token_id, stop_strings=StopStrings(tok, ["</action>"]))
    new = sample_tokens(model, prompts, generator=torch.Generator().manual_seed(4), **kwargs)
    ref = bench_eval.reference_sampler.sample_tokens(model, prompts, generator=torch.Generator().manual_seed(4),
                                                     **kwargs)
    assert [t for t, _ in new] == [t for t, _ in ref]  # the same tokens
    # log-probs: the same weights through two float32 matmul kernels (the reference keeps torch's
    # linear layers, arena/lm/linear_kernel.py), so they agree to float rounding (~1e-6 on values of
    # size <= ~10); a wrong weight, position or token would move them by far more than 1e-5
    assert max(abs(a - b) for (_, la), (_, lb) in zip(new, ref) for a, b in zip(la, lb)) <= 1e-5
    assert len({len(t) for t, _ in new}) >= 2 or temperature == 0  # rows stopped at different steps


def test_the_reference_runs_torch_linear_layers_on_a_twin_sharing_the_weights(bench_eval, monkeypatch):
    from torch.profiler import profile

    import arena.lm.linear_kernel as linear_kernel
    from arena.lm.linear_kernel import linear_kernel_of, onednn_available
    if not onednn_available():
        pytest.skip("this torch has no oneDNN")
    monkeypatch.setattr(linear_kernel, "ONEDNN_MIN_MACS", 0)  # this model's products are small: oneDNN all the same
    tok = build_tokenizer(["map 1\n#_OX#\n<action>up</action>"], vocab_size=270)
    model = build_model(len(tok), size="tiny", seed=3)
    twin = bench_eval.reference_sampler.torch_linear_twin(model)
    assert linear_kernel_of(model) == "onednn" and linear_kernel_of(twin) == "torch"
    assert twin is bench_eval.reference_sampler.torch_linear_twin(model)  # made once
    assert all(p is q for p, q in zip(model.parameters(), twin.parameters()))  # follows every update
    prompts = [tok.encode("map 1\n", add_special_tokens=False)]
    ops = {}
    for name, sample in (("new", sample_tokens), ("reference", bench_eval.reference_sampler.sample_tokens)):
        with profile() as prof:
            sample(model, prompts, temperature=1.0, max_new_tokens=3, pad_token_id=tok.pad_token_id,
                   generator=torch.Generator().manual_seed(0))
        ops[name] = {e.key for e in prof.key_averages()}
    assert "mkldnn::_linear_pointwise" in ops["new"] and "mkldnn::_linear_pointwise" not in ops["reference"]


def test_eval_benchmark_reports_the_equality_check(bench_eval, monkeypatch, sokoban_policy):
    # eval_split on a prebuilt model (the BC step is the fixture's): the dict another benchmark imports
    monkeypatch.setattr(bench_eval, "build_policy_model", lambda env, budget, overrides: sokoban_policy)
    result = bench_eval.eval_split("sokoban", "default", 1, n=8, repeats=1)
    assert result["wins_identical"] and result["tokens_identical"]
    assert result["reference_s"] > 0 and result["new_s"] > 0
    assert result["ratio"] == pytest.approx(result["new_s"] / result["reference_s"])


def test_the_reference_tokenizes_one_prompt_at_a_time(bench_eval):
    # the one change the reference puts back in make_policy: generate(3 prompts) makes 3 encode
    # and 3 decode calls (today's makes one batched call each way, and no encode call)
    ref = bench_eval.reference_sampler
    corpus = [f"map {i}\n<think>x</think><action>up</action>" for i in range(8)]
    tok = build_tokenizer(corpus, vocab_size=280)
    model = build_model(len(tok), size="tiny", seed=3, tie_word_embeddings=False)
    calls = {"encode": 0, "decode": 0}
    wrapped = ref.OnePromptAtATime(tok)
    for name in calls:
        def counted(*args, _real=getattr(tok, name), _name=name, **kwargs):
            calls[_name] += 1
            return _real(*args, **kwargs)
        setattr(wrapped, name, counted)  # instance attributes shadow __getattr__'s lookup
    ref.OnePromptAtATime._made[tok] = wrapped
    try:
        out = ref.make_policy(model, tok, max_new_tokens=4, seed=0)(["map 1\n", "map 2\n", "map 3\n"])
    finally:
        del ref.OnePromptAtATime._made[tok]
    assert calls == {"encode": 3, "decode": 3}
    assert [ids for _, ids, _, _ in out] == [tok.encode(p, add_special_tokens=False) for p in ("map 1\n", "map 2\n", "map 3\n")]


def test_the_reference_prefills_the_last_layer_at_every_position(bench_eval):
    # the change the reference puts back in sample_tokens: its prefill's last layer (the MLP's
    # input) covers every prompt position (6 rows of 3-4 tokens: one chunk of width 4); today's
    # covers the last one; each decode step covers 1 in both. Today's packed layers run their MLP
    # in decoding.feed_forward (watched); the reference runs the model's MLP module (hooked).
    corpus = [f"map {i}\n<think>x</think><action>up</action>" for i in range(8)]
    tok = build_tokenizer(corpus, vocab_size=280)
    model = build_model(len(tok), size="tiny", seed=3, tie_word_embeddings=False)
    prompts = [tok.encode(f"map {i}\n", add_special_tokens=False) for i in range(6)]
    width = max(len(p) for p in prompts)
    reference = []
    hook = model.model.layers[-1].mlp.register_forward_hook(lambda mod, args, out: reference.append(args[0].shape[1]))
    try:
        with last_layer_mlp_widths(model) as today:
            sample_tokens(model, prompts, temperature=0, max_new_tokens=2, pad_token_id=tok.pad_token_id)
            bench_eval.reference_sampler.sample_tokens(model, prompts, temperature=0, max_new_tokens=2,
                                                       pad_token_id=tok.pad_token_id)
    finally:
        hook.remove()
    assert width > 1 and today == [1, 1] and reference == [width, 1]
