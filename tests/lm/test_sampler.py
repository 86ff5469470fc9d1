"""The sampler (KV-cache decoding), the one-pass log-probs, the policy adapter, the benchmark."""
import math

import pytest
import torch

from arena.lm import decoding, sampler
from arena.lm.logprobs import token_logprobs_and_entropy
from arena.lm.model import build_model
from arena.lm.sampler import draw_from, left_pad, make_policy, sample_tokens, top_p_filter
from arena.lm.tokenizer import build_tokenizer, tag_id
from tests.benchmark_module import load_benchmark

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


def test_left_pad_by_hand():
    # prompts of lengths 2, 3, 1 -> width 3; row b has 3 - len_b pad columns on the left
    ids, mask = left_pad([[4, 5], (6, 7, 8), [9]], pad_token_id=1, device="cpu")
    assert ids.dtype == mask.dtype == torch.long
    assert ids.tolist() == [[1, 4, 5], [6, 7, 8], [1, 1, 9]]
    assert mask.tolist() == [[0, 1, 1], [1, 1, 1], [0, 0, 1]]
    with pytest.raises(ValueError, match="non-empty"):
        left_pad([[4], []], pad_token_id=0, device="cpu")


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


def test_a_tokenizer_with_a_chat_template_gets_its_prompts_wrapped_as_eval_wraps_them():
    """The embedded policy encodes a turn's prompt as `arena eval` (LocalModel.encode) and the verl
    agent loop do: inside the chat template when the tokenizer has one. By the template below a
    prompt p becomes "<u>" + p + "<b>", whose raw encoding is the expected ids; without the template
    the ids are p's own."""
    from arena.evaluation.local_model import LocalModel

    corpus = ["<u>map 1\n#_OX#\n<b><action>left</action>", "<u>map 2\n#_PX#\n<b><action>up</action>"] * 5
    tok = build_tokenizer(corpus, vocab_size=280)
    model = build_model(len(tok), size="tiny", seed=0)
    prompt = "map 1\n#_OX#\n"
    (_, raw_ids, _, _), = make_policy(model, tok, temperature=0.0, max_new_tokens=4)([prompt])
    assert raw_ids == tok.encode(prompt, add_special_tokens=False)
    tok.chat_template = "{% for m in messages %}<u>{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}<b>{% endif %}"
    (_, ids, _, _), = make_policy(model, tok, temperature=0.0, max_new_tokens=4)([prompt])
    wrapped = tok.encode("<u>" + prompt + "<b>", add_special_tokens=False)
    assert ids == wrapped != raw_ids
    assert LocalModel.encode(SimpleNamespace(tokenizer=tok), [{"role": "user", "content": prompt}]) == wrapped


def test_benchmark_quick_smoke(capsys):
    bench = load_benchmark("bench_sampler")
    result = bench.main(["--quick"])
    for key in ("ours_tok_s", "generate_tok_s", "ratio", "torch_linear_ratio"):
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


# --- the text stop rule with a real (byte-level BPE, HF layout) tokenizer -----------------

from types import SimpleNamespace  # noqa: E402

from arena.lm.hf_cache import CACHE_KWARG  # noqa: E402

from arena.lm.sampler import StopStrings  # noqa: E402
from tests.verl.real_tokenizer import STOP, build_real_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def real_tok(tmp_path_factory):
    tok = build_real_tokenizer(tmp_path_factory.mktemp("bpe"))
    assert len(tok.encode(STOP, add_special_tokens=False)) > 1  # the point of the fixture
    return tok


class ScriptedLM(torch.nn.Module):
    """A causal LM that emits a fixed script of token ids (through the generic HF-cache
    decoder): row b follows scripts[last prompt token of b % len(scripts)], and the logits put
    20 on the script's next token, 0 elsewhere, so greedy decoding replays the script."""

    def __init__(self, scripts, vocab):
        super().__init__()
        self.scripts, self.vocab = scripts, vocab
        self.dummy = torch.nn.Parameter(torch.zeros(1))
        self.config = SimpleNamespace(model_type="scripted")

    def _logits(self, script_idx, step):  # step [B]: index of the token to emit
        logits = torch.zeros(len(step), 1, self.vocab)  # [B, 1, V]
        for b, (s, t) in enumerate(zip(script_idx.tolist(), step.tolist())):
            script = self.scripts[s]
            logits[b, 0, script[min(t, len(script) - 1)]] = 20.0
        return logits

    def forward(self, input_ids, attention_mask, position_ids, **kwargs):
        past_key_values = kwargs.get(CACHE_KWARG)  # the cache, under the installed transformers' name
        if past_key_values is None:  # prefill: remember each row's prompt length and script
            cache = SimpleNamespace(length=attention_mask.sum(1),
                                    script=input_ids[:, -1] % len(self.scripts))
            cache.reorder_cache = lambda rows: (setattr(cache, "length", cache.length[rows]),
                                                setattr(cache, "script", cache.script[rows]))
            return SimpleNamespace(logits=self._logits(cache.script, torch.zeros_like(cache.length)),
                                   **{CACHE_KWARG: cache})
        # generated token t sits at position L + t, so the next one is script[position - L + 1]
        step = position_ids[:, 0] - past_key_values.length + 1  # [B]
        return SimpleNamespace(logits=self._logits(past_key_values.script, step), **{CACHE_KWARG: past_key_values})


def first_stop(tok, script, stops):
    """The reference rule, by brute force: the shortest prefix whose text contains a stop."""
    for k in range(1, len(script) + 1):
        if any(s in tok.decode(script[:k], skip_special_tokens=True) for s in stops):
            return k
    return None


def test_multi_token_stop_string_ends_the_response_exactly(real_tok):
    # Script 0 says "<action>up</action> then the box": the byte-level pre-tokenizer splits at
    # the space before "then", so a token boundary falls right after "</action>" and the
    # response must be exactly "<action>up</action>" (its ids: the script's first k ids, k > the
    # number of ids of "</action>" alone). Script 1 never says the stop: it runs to
    # max_new_tokens = 30. Script 2 says the stop later than script 0 ("the action is
    # left</action>"), so rows leave the batch at different steps.
    texts = ["<action>up</action> then the box", "the player pushes the box to the left and then up",
             "the action is left</action>. then"]
    scripts = [real_tok.encode(t, add_special_tokens=False) for t in texts]
    model = ScriptedLM(scripts, len(real_tok))
    rule = StopStrings(real_tok, [STOP])
    prompts = [[3], [4, 4], [5, 5, 5], [6]]  # last token % 3 -> scripts 0, 1, 2, 0
    outs = sample_tokens(model, prompts, temperature=0, max_new_tokens=30, stop_strings=rule,
                         pad_token_id=real_tok.pad_token_id)
    responses = [real_tok.decode(ids, skip_special_tokens=True) for ids, _ in outs]
    assert responses[0] == responses[3] == "<action>up</action>"
    assert responses[2] == "the action is left</action>"
    assert outs[0][0] == scripts[0][: len(outs[0][0])] and len(outs[0][0]) > len(real_tok.encode(STOP))
    assert len(outs[1][0]) == 30  # no stop: the length limit (the script's last id repeats)
    for (ids, logp), script in zip(outs, [scripts[0], scripts[1], scripts[2], scripts[0]]):
        k = first_stop(real_tok, script, [STOP])
        assert ids == (script[:k] if k else ids) and len(logp) == len(ids)


def test_stop_token_that_overshoots_keeps_ids_and_text_in_agreement(real_tok):
    # "</action>." : BPE may merge ">." (a punctuation run is one pre-token), so the token that
    # completes the stop may carry the "."; the response then ends with that token, and
    # decode(ids) contains the stop, while no shorter prefix does (the reference rule).
    text = "<action>up</action>.. the box"
    script = real_tok.encode(text, add_special_tokens=False)
    model = ScriptedLM([script], len(real_tok))
    (ids, _), = sample_tokens(model, [[7]], temperature=0, max_new_tokens=40,
                              stop_strings=StopStrings(real_tok, [STOP]), pad_token_id=0)
    k = first_stop(real_tok, script, [STOP])
    assert ids == script[:k]
    decoded = real_tok.decode(ids)
    assert STOP in decoded and STOP not in real_tok.decode(ids[:-1])
    assert decoded.startswith("<action>up</action>") and "the" not in decoded


def test_policy_and_rollout_rows_stay_exact_with_a_real_tokenizer(real_tok):
    # make_policy finds that "</action>" is several tokens and stops on text; the rollout's
    # per-turn rows hold the sampled ids as they are (never re-tokenised) and their text.
    from arena.agent.rollout import rollout
    from arena.envs import make

    script = real_tok.encode("<think>go</think><action>up</action> then left", add_special_tokens=False)
    model = ScriptedLM([script], len(real_tok))
    policy = make_policy(model, real_tok, temperature=0, max_new_tokens=40)
    batch, _ = rollout(lambda: make("sokoban"), [0, 1], 2, policy, max_turns=2,
                       pad_id=real_tok.pad_token_id)
    expected = script[: first_stop(real_tok, script, [STOP])]
    assert 4 <= len(batch) <= 8  # 2 seeds x 2 members, 1 or 2 turns each
    for row in range(len(batch)):
        n = int(batch.response_mask[row].sum())
        assert batch.response_ids[row, :n].tolist() == expected  # the sampled ids, cut at the stop
        assert batch.response_text[row] == "<think>go</think><action>up</action>"
        assert bool(batch.format_valid[row])  # the projection read the action from the text


def test_stop_strings_on_a_random_model_follow_the_reference_rule(real_tok):
    # A random tiny Qwen3 over the BPE vocabulary, T = 1, stops "th" and "</action>": every row
    # ends at the first prefix that contains a stop (reference rule), or at eos, or at the limit.
    # "th" is frequent enough that some rows do stop on it (checked: the test is not vacuous).
    model = build_model(len(real_tok), size="tiny", seed=3, tie_word_embeddings=False)
    rule = StopStrings(real_tok, ["th", STOP])
    prompts = [real_tok.encode(t, add_special_tokens=False) for t in ("the box", "move up", "#_OX#")] * 10
    outs = sample_tokens(model, prompts, temperature=1.0, max_new_tokens=25, stop_strings=rule,
                         stop_token_ids=[real_tok.eos_token_id], generator=torch.Generator().manual_seed(1))
    stopped = 0
    for ids, _ in outs:
        k = first_stop(real_tok, ids, rule.stops)
        if k is not None:
            assert k == len(ids)
            stopped += 1
        else:
            assert len(ids) == 25 or ids[-1] == real_tok.eos_token_id
    assert stopped >= 3
