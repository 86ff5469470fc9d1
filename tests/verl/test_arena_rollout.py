"""verl's "arena" rollout without Ray: the registrations, the generator (arena's sampler on a
local HF checkpoint with a real byte-level BPE tokenizer), the server's batching and weight
sync, and the worker-side adapter's half of verl's hybrid weight-sync protocol."""
from __future__ import annotations

import asyncio

import pytest
import torch

pytest.importorskip("verl")
pytest.importorskip("ray")

from arena.lm.model import build_model  # noqa: E402
from arena.lm.sampler import StopStrings, sample_tokens  # noqa: E402
from arena.backends.verl import arena_rollout  # noqa: E402
from arena.backends.verl.rollout_server import ArenaGenerator, ArenaRolloutServer, batch_key  # noqa: E402
from tests.verl.real_tokenizer import STOP, build_real_tokenizer  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """A tiny Qwen3 + the BPE tokenizer, saved together in the HF layout (what verl's
    `model.path` points at)."""
    path = tmp_path_factory.mktemp("ckpt")
    tok = build_real_tokenizer(path)
    model = build_model(len(tok), size="tiny", seed=4, tie_word_embeddings=False)
    model.save_pretrained(str(path))
    return path, tok, model


PROMPTS = ["the box is", "move up", "#_OX#"]


def test_arena_is_registered_in_both_of_verls_rollout_registries():
    from verl.workers.rollout.base import get_rollout_class
    from verl.workers.rollout.replica import get_rollout_replica_class

    assert arena_rollout.is_registered()
    assert get_rollout_replica_class("arena") is arena_rollout.ArenaReplica
    assert get_rollout_class("arena", "async") is arena_rollout.ArenaServerAdapter
    arena_rollout.register_arena_rollout()  # idempotent
    assert arena_rollout.server_name(2, 0) == "arena_server_2_0"


def test_generator_samples_as_arenas_sampler_from_the_saved_checkpoint(checkpoint):
    # the generator loads the checkpoint (float32, eager attention) and one batch of requests is
    # exactly one sample_tokens call with the same generator seed: same ids, same log-probs
    path, tok, model = checkpoint
    gen = ArenaGenerator.from_pretrained(str(path), seed=7, default_max_tokens=12)
    prompts = [tok.encode(p, add_special_tokens=False) for p in PROMPTS]
    key = batch_key({"temperature": 1.0, "top_p": 0.9, "logprobs": True, "stop": [STOP], "top_k": -1,
                     "repetition_penalty": 1.0}, 12)
    got = gen.generate_batch(key, prompts)
    want = sample_tokens(model.eval(), prompts, temperature=1.0, top_p=0.9, max_new_tokens=12,
                         stop_token_ids=[tok.eos_token_id], pad_token_id=tok.pad_token_id,
                         generator=torch.Generator().manual_seed(7), stop_strings=StopStrings(tok, [STOP]))
    assert [g["token_ids"] for g in got] == [ids for ids, _ in want]
    for g, (_, logp) in zip(got, want):
        assert g["log_probs"] == pytest.approx(logp, abs=1e-5) and g["stop_reason"] == "completed"
    no_logp = gen.generate_batch(batch_key({"temperature": 0}, 4), prompts[:1])
    assert no_logp[0]["log_probs"] is None and len(no_logp[0]["token_ids"]) <= 4


def test_unsupported_sampling_parameters_are_refused_not_ignored():
    with pytest.raises(ValueError, match="top_k=5 is not supported"):
        batch_key({"top_k": 5}, 8)
    with pytest.raises(ValueError, match="repetition_penalty=1.2"):
        batch_key({"repetition_penalty": 1.2}, 8)
    # max_tokens wins over the default; stop strings become part of the batch key
    assert batch_key({"max_tokens": 3, "stop": ["x"]}, 8)[2:4] == (3, ("x",))


def test_server_batches_concurrent_requests_and_returns_token_outputs(checkpoint):
    # 3 concurrent greedy requests arrive within the batch window: one sample_tokens call;
    # greedy decoding in a batch equals each prompt alone (the sampler's tested invariant)
    path, tok, model = checkpoint
    server = ArenaRolloutServer(ArenaGenerator(model, tok, default_max_tokens=6), batch_wait_s=0.05)
    prompts = [tok.encode(p, add_special_tokens=False) for p in PROMPTS]
    params = {"temperature": 0, "logprobs": True, "max_tokens": 6}

    async def run():
        return await asyncio.gather(*[server.generate(f"r{i}", prompt_ids=p, sampling_params=params)
                                      for i, p in enumerate(prompts)])
    outs = asyncio.run(run())
    assert server.batches == 1
    for out, prompt in zip(outs, prompts):
        (alone, logp), = sample_tokens(model, [prompt], temperature=0, max_new_tokens=6,
                                       stop_token_ids=[tok.eos_token_id], pad_token_id=tok.pad_token_id)
        assert out.token_ids == alone and out.log_probs == pytest.approx(logp, abs=1e-5)
    with pytest.raises(ValueError, match="text only"):
        asyncio.run(server.generate("x", prompt_ids=prompts[0], sampling_params=params, image_data=[1]))


def test_weight_sync_makes_the_next_generation_use_the_new_weights(checkpoint):
    # the server starts with model A; after update_weights(B's state dict) greedy outputs are
    # B's, token for token, and the step tag travels in TokenOutput.extra_fields
    path, tok, model_a = checkpoint
    model_b = build_model(len(tok), size="tiny", seed=99, tie_word_embeddings=False).eval()
    gen = ArenaGenerator.from_pretrained(str(path), default_max_tokens=8)
    server = ArenaRolloutServer(gen, batch_wait_s=0.0)
    prompt = tok.encode("the box is", add_special_tokens=False)
    params = {"temperature": 0, "max_tokens": 8}
    expect = {name: sample_tokens(m, [prompt], temperature=0, max_new_tokens=8, stop_token_ids=[tok.eos_token_id],
                                  pad_token_id=tok.pad_token_id)[0][0] for name, m in (("a", model_a), ("b", model_b))}
    assert expect["a"] != expect["b"]  # otherwise the test could not tell the weights apart

    async def run():
        before = await server.generate("r", prompt_ids=prompt, sampling_params=params)
        count = await server.update_weights(dict(model_b.state_dict()), global_steps=3)
        after = await server.generate("r", prompt_ids=prompt, sampling_params=params)
        return before, count, after
    before, count, after = asyncio.run(run())
    assert before.token_ids == expect["a"] and after.token_ids == expect["b"]
    assert count == len(dict(model_b.named_parameters())) and after.extra_fields["global_steps"] == 3
    with pytest.raises(KeyError, match="not in the model"):
        gen.load_weights([("model.no_such.weight", torch.zeros(1))])


class _FakeServerHandle:
    def __init__(self):
        self.calls = []

        class _Method:
            def remote(inner, state, global_steps):  # noqa: N805
                self.calls.append((state, global_steps))

                async def done():
                    return len(state)
                return done()
        self.update_weights = _Method()


def _adapter(monkeypatch, rank: int, handle, path, tp: int = 1):
    """The adapter as verl's worker builds it (rollout and model sections of verl's config)."""
    from omegaconf import OmegaConf

    from arena.backends.verl.verl_config import _base

    monkeypatch.setenv("RANK", str(rank))
    base = _base().actor_rollout_ref
    rollout = OmegaConf.to_container(base.rollout, resolve=False)
    rollout.update(name="arena", tensor_model_parallel_size=tp)
    model = OmegaConf.to_container(base.model, resolve=False)
    model.update(path=str(path))
    monkeypatch.setattr(arena_rollout.ray, "get_actor", lambda name: handle if name == "arena_server_%d_0" % (rank // tp)
                        else pytest.fail(f"looked up {name}"))
    return arena_rollout.ArenaServerAdapter(OmegaConf.create(rollout), OmegaConf.create(model), None)


def test_adapter_sends_the_engines_weights_on_the_cpu_to_its_replicas_server(monkeypatch, checkpoint):
    # verl's worker hands update_weights a generator of (HF name, full tensor); the adapter
    # consumes all of it, copies to the CPU (a later in-place update must not leak in) and
    # sends one dict to server arena_server_<replica>_0 with the step
    handle = _FakeServerHandle()
    adapter = _adapter(monkeypatch, 1, handle, checkpoint[0])
    assert (adapter.replica_rank, adapter.rollout_rank, adapter.is_leader_rank) == (1, 0, True)
    w = torch.ones(2, 2)
    asyncio.run(adapter.update_weights(iter([("a.weight", w), ("b.bias", torch.zeros(3))]), global_steps=5))
    w.add_(1.0)
    (state, step), = handle.calls
    assert step == 5 and sorted(state) == ["a.weight", "b.bias"]
    assert torch.equal(state["a.weight"], torch.ones(2, 2)) and state["a.weight"].device.type == "cpu"
    with pytest.raises(ValueError, match="wire_format='delta_flush' is not supported"):
        asyncio.run(adapter.update_weights(iter([]), wire_format="delta_flush"))
    # rank 3 with tensor parallel 2: replica 1, rollout rank 1, not the leader: it consumes the
    # generator (the full tensors are gathered collectively) but sends nothing
    adapter = _adapter(monkeypatch, 3, handle, checkpoint[0], tp=2)
    assert (adapter.replica_rank, adapter.rollout_rank, adapter.is_leader_rank) == (1, 1, False)
    consumed = []
    asyncio.run(adapter.update_weights((consumed.append(i) or ("x", torch.zeros(1)) for i in range(3))))
    assert consumed == [0, 1, 2] and len(handle.calls) == 1
