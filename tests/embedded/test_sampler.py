"""The sampler (KV-cache decoding), the one-pass log-probs, the policy adapter, the benchmark."""
import importlib.util
import math
from pathlib import Path

import pytest
import torch

from arena.backends.embedded import decoding, sampler
from arena.backends.embedded.logprobs import token_logprobs_and_entropy
from arena.backends.embedded.model import build_model
from arena.backends.embedded.sampler import draw_from, left_pad, make_policy, sample_tokens, top_p_filter
from arena.backends.embedded.tokenizer import build_tokenizer, tag_id

V = 40
# Variable lengths (left padding up to 7 slots) and a repeated prompt (prefilled once).
PROMPTS = [[5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15, 16, 17], [5, 6, 7], [20, 21, 22, 23, 24, 25], [30]]



pytestmark = pytest.mark.usefixtures("one_thread")

@pytest.fixture(scope="module")
def model():
    # untied embeddings: a random tied model mostly repeats its last token under greedy decoding
    return build_model(V, size="tiny", seed=11, tie_word_embeddings=False)


@pytest.fixture(params=["static", "hf"])
def decoder_kind(request, monkeypatch):
    if request.param == "hf":  # force the generic DynamicCache path
        monkeypatch.setattr(sampler, "make_decoder", lambda m, b, s: decoding.HFCacheDecoder(m))
    else:  # prefill in chunks of 2 rows (sorted by length), each with its own width
        monkeypatch.setattr(decoding, "PREFILL_ROWS", 2)
    return request.param


def right_pad(rows, dtype=torch.long):
    """(values [N, T], mask [N, T]) right-padded with 0."""
    width = max(len(r) for r in rows)
    ids = torch.zeros(len(rows), width, dtype=dtype)  # [N, T]
    mask = torch.zeros(len(rows), width)  # [N, T]
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.tensor(r)
        mask[i, : len(r)] = 1
    return ids, mask


def test_fast_path_is_used_for_qwen3(model):
    assert isinstance(decoding.make_decoder(model, 2, 8), decoding.StaticCacheDecoder)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_sampler_logp_equals_full_forward_logp(model, decoder_kind, temperature):
    # Correctness gate: log_softmax(logits / T) of one full pass over prompt ++ response
    # (same left padding, same positions) at the sampled tokens == the sampler's log-probs.
    g = torch.Generator().manual_seed(0)
    outs = sample_tokens(model, PROMPTS, temperature=temperature, top_p=0.9, max_new_tokens=9,
                         stop_token_ids=[3, 4], pad_token_id=0, generator=g)
    p_ids, p_mask = left_pad(PROMPTS, 0, "cpu")  # [5, 10]
    r_ids, r_mask = right_pad([t for t, _ in outs])  # [5, T]
    sampler_logp, _ = right_pad([lp for _, lp in outs], dtype=torch.float32)  # [5, T]
    with torch.no_grad():
        full_logp, _ = token_logprobs_and_entropy(model, p_ids, p_mask, r_ids, r_mask, temperature=temperature)
    assert (full_logp - sampler_logp).abs().max().item() <= 1e-5
    assert all(1 <= len(t) <= 9 and len(t) == len(lp) for t, lp in outs)
    assert len({len(t) for t, _ in outs}) >= 2  # some rows stopped early and left the batch
    assert all(t[-1] in (3, 4) for t, _ in outs if len(t) < 9)  # a short row ends with its stop token


def naive_greedy(model, prompt, n):
    """Argmax decoding with no cache and no padding: a fresh full forward for every token;
    returns (tokens, log_softmax(logits)[token])."""
    ids, logps = list(prompt), []
    with torch.no_grad():
        for _ in range(n):
            logq = torch.log_softmax(model(input_ids=torch.tensor([ids])).logits[0, -1], dim=-1)  # [V]
            ids.append(int(logq.argmax()))
            logps.append(float(logq.max()))
    return ids[len(prompt):], logps


def test_greedy_matches_uncached_unpadded_decoding(model, decoder_kind):
    outs = sample_tokens(model, PROMPTS, temperature=0, max_new_tokens=6, pad_token_id=0)
    assert len({tuple(t) for t, _ in outs}) >= 4  # the rows really differ
    for prompt, (tokens, logp) in zip(PROMPTS, outs):
        naive_tokens, naive_logp = naive_greedy(model, prompt, 6)
        assert tokens == naive_tokens
        assert logp == pytest.approx(naive_logp, abs=1e-5)


def test_rows_stop_at_their_stop_token_and_others_are_unchanged(model, decoder_kind):
    # Greedy is deterministic, so the run with a stop token must equal the run without one,
    # cut just after the first occurrence of that token in each row (finished rows leave the
    # batch; the remaining rows must not notice).
    full = sample_tokens(model, PROMPTS, temperature=0, max_new_tokens=8, pad_token_id=0)
    stop = full[1][0][4]  # row 1's fifth token
    cut = sample_tokens(model, PROMPTS, temperature=0, max_new_tokens=8, stop_token_ids=[stop], pad_token_id=0)
    for (tokens, logp), (c_tokens, c_logp) in zip(full, cut):
        n = tokens.index(stop) + 1 if stop in tokens else len(tokens)
        assert c_tokens == tokens[:n]
        assert c_logp == pytest.approx(logp[:n], abs=1e-6)
    assert len(cut[1][0]) <= 5
    assert len({len(t) for t, _ in cut}) >= 3  # rows stopped at different steps (fixed seed: 4, 5, 8)


def test_sampling_is_reproducible_with_a_seeded_generator(model):
    runs = [sample_tokens(model, PROMPTS, temperature=1.0, max_new_tokens=5, generator=torch.Generator().manual_seed(s))
            for s in (1, 1, 2)]
    assert runs[0] == runs[1]
    assert runs[0] != runs[2]


def test_tiny_top_p_is_greedy_but_logp_stays_untruncated(model):
    # top_p -> 0 keeps only the most likely token; the returned logp is still log_softmax(logits)
    greedy = sample_tokens(model, PROMPTS, temperature=0, max_new_tokens=4)
    nucleus = sample_tokens(model, PROMPTS, temperature=1.0, top_p=1e-6, max_new_tokens=4,
                            generator=torch.Generator().manual_seed(0))
    for (g_tok, g_lp), (n_tok, n_lp) in zip(greedy, nucleus):
        assert g_tok == n_tok
        assert n_lp == pytest.approx(g_lp, abs=1e-6)
        assert all(lp < 0 for lp in n_lp)  # not log(1) = 0, the truncated distribution


def test_top_p_filter_by_hand():
    # probs in vocabulary order [0.15, 0.5, 0.05, 0.3]; sorted: 0.5, 0.3, 0.15, 0.05 with mass
    # before each token 0, 0.5, 0.8, 0.95. A token is dropped iff its mass-before >= top_p:
    # top_p 0.7 keeps {0.5, 0.3} (ids 1, 3); top_p 0.85 also keeps 0.15 (id 0); 1.0 keeps all.
    logp = torch.tensor([[0.15, 0.5, 0.05, 0.3]]).log()  # [1, 4]
    kept = lambda p: torch.isfinite(top_p_filter(logp, p))[0].tolist()
    assert kept(0.7) == [False, True, False, True]
    assert kept(0.85) == [True, True, False, True]
    assert kept(1.0) == [True, True, True, True]


def test_draw_from_follows_the_probabilities():
    # 40000 draws of [0.1, 0, 0.6, 0.3]: sd of a frequency <= sqrt(0.25 / 40000) = 0.0025;
    # the seeded draw is fixed, 0.01 is 4 sd. Zero-probability tokens are never drawn.
    probs = torch.tensor([[0.1, 0.0, 0.6, 0.3]]).expand(40000, 4)  # [40000, 4]
    freq = torch.bincount(draw_from(probs, torch.Generator().manual_seed(0)), minlength=4) / 40000
    assert freq[1] == 0
    assert torch.allclose(freq, torch.tensor([0.1, 0.0, 0.6, 0.3]), atol=0.01)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logprobs_match_naive_per_row_computation(model, temperature):
    # Naive: each row alone, unpadded (positions 0..L-1), q = softmax(logits / T);
    # logp = log q(token), entropy = -sum q log q. Padded response slots must be 0.
    responses = [[1, 2], [3, 4, 5, 6], [7], [8, 9, 10]]
    prompts = PROMPTS[:4]
    p_ids, p_mask = left_pad(prompts, 0, "cpu")
    r_ids, r_mask = right_pad(responses)
    logp, entropy = token_logprobs_and_entropy(model, p_ids, p_mask, r_ids, r_mask, temperature=temperature)
    assert logp.requires_grad  # grad mode -> differentiable
    for n, (prompt, resp) in enumerate(zip(prompts, responses)):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt + resp])).logits[0] / temperature  # [L, V]
        logq = torch.log_softmax(logits[len(prompt) - 1 : -1], dim=-1)  # [len(resp), V]
        expected = logq[torch.arange(len(resp)), torch.tensor(resp)]
        assert torch.allclose(logp[n, : len(resp)], expected, atol=1e-5, rtol=0)
        assert torch.allclose(entropy[n, : len(resp)], -(logq.exp() * logq).sum(-1), atol=1e-5, rtol=0)
        assert (logp[n, len(resp):] == 0).all() and (entropy[n, len(resp):] == 0).all()
    (logp * r_mask).sum().backward()
    assert model.model.embed_tokens.weight.grad.abs().sum() > 0
    model.zero_grad(set_to_none=True)
    with torch.no_grad():
        assert not token_logprobs_and_entropy(model, p_ids, p_mask, r_ids, r_mask)[0].requires_grad
    with pytest.raises(ValueError, match="shape mismatch"):
        token_logprobs_and_entropy(model, p_ids, p_mask[:, 1:], r_ids, r_mask)


def test_policy_adapter_returns_text_ids_and_logp():
    moves = ["left", "up"] * 5
    corpus = [f"map {i}\n#_OX#\n<think>push box {d}</think><action>{d}</action>" for i, d in enumerate(moves)]
    tok = build_tokenizer(corpus, vocab_size=280)
    model = build_model(len(tok), size="tiny", seed=0)
    stop = tag_id(tok, "</action>")
    policy = make_policy(model, tok, temperature=1.0, max_new_tokens=12, seed=5)
    prompts = ["map 1\n#_OX#\n", "map 22\n#_PX#\n"]
    out = policy(prompts)
    assert out == make_policy(model, tok, temperature=1.0, max_new_tokens=12, seed=5)(prompts)  # seeded
    for prompt, (text, prompt_ids, token_ids, logp) in zip(prompts, out):
        assert prompt_ids == tok.encode(prompt, add_special_tokens=False)
        assert text == tok.decode(token_ids, skip_special_tokens=True)
        assert len(logp) == len(token_ids) and all(math.isfinite(x) and x <= 0 for x in logp)
        assert len(token_ids) == 12 or token_ids[-1] in (stop, tok.eos_token_id)
    with pytest.raises(ValueError, match="temperature >= 0"):
        sample_tokens(model, [[1]], temperature=-1)
    with pytest.raises(ValueError, match="non-empty"):
        sample_tokens(model, [[1], []])


def test_benchmark_quick_smoke(capsys):
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_sampler.py"
    spec = importlib.util.spec_from_file_location("bench_sampler", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    result = bench.main(["--quick"])
    for key in ("ours_tok_s", "generate_tok_s", "ratio"):
        assert math.isfinite(result[key]) and result[key] > 0
    assert "ratio ours/generate" in capsys.readouterr().out


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_sampler_logp_equals_full_forward_logp():
    model = build_model(V, size="tiny", seed=11, tie_word_embeddings=False).to("cuda")
    g = torch.Generator(device="cuda").manual_seed(0)
    outs = sample_tokens(model, PROMPTS, temperature=0.7, top_p=0.9, max_new_tokens=9, stop_token_ids=[3, 4],
                         generator=g)
    p_ids, p_mask = left_pad(PROMPTS, 0, "cuda")
    r_ids, r_mask = right_pad([t for t, _ in outs])
    sampler_logp, _ = right_pad([lp for _, lp in outs], dtype=torch.float32)
    with torch.no_grad():
        full_logp, _ = token_logprobs_and_entropy(model, p_ids, p_mask, r_ids.cuda(), r_mask.cuda(), temperature=0.7)
    # TF32 matmuls may be on for CUDA; fp32 proper gives ~1e-6 as on CPU
    assert (full_logp.cpu() - sampler_logp).abs().max().item() <= 1e-4
