"""`arena serve`'s OpenAI-compatible endpoints on the BC checkpoint (127.0.0.1)."""
from __future__ import annotations

import httpx
import torch

from arena.agent.prompts import render_prompt
from arena.envs import eval_seed, make


def test_models_and_a_greedy_completion_match_the_training_sampler(bc_checkpoint, served_checkpoint):
    from arena.lm.model import load_model
    from arena.lm.sampler import make_policy

    torch.set_num_threads(1)
    env = make("sokoban", dim=5, max_turns=8)
    obs, info = env.reset(eval_seed(2))
    prompt = render_prompt("sokoban", env.instruction, obs, [], 0, info.get("admissible_actions"), template="minimal")
    with httpx.Client(base_url=served_checkpoint + "/", timeout=30) as http:
        models = http.get("models").json()
        assert [m["id"] for m in models["data"]] == ["bc-tiny"] and models["object"] == "list"
        body = {"model": "bc-tiny", "messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens": 8}
        reply = http.post("chat/completions", json=body).json()
        # the embedded sampler's own greedy policy, called directly, is the reference
        model, tokenizer = load_model(bc_checkpoint)
        text, prompt_ids, tokens, _ = make_policy(model, tokenizer, temperature=0, max_new_tokens=8)([prompt])[0]
        choice = reply["choices"][0]
        assert choice["message"] == {"role": "assistant", "content": text}
        assert choice["finish_reason"] == ("stop" if len(tokens) < 8 or text.endswith("</action>") else "length")
        assert reply["usage"] == {"prompt_tokens": len(prompt_ids), "completion_tokens": len(tokens),
                                  "total_tokens": len(prompt_ids) + len(tokens)}
        # sampling with a seed is reproducible
        sampled = [http.post("chat/completions", json={**body, "temperature": 1.0, "seed": 7}).json() for _ in range(2)]
        assert sampled[0]["choices"] == sampled[1]["choices"]
        # unsupported requests are refused with an OpenAI-style error
        for bad in ({**body, "stream": True}, {**body, "n": 2}, {"model": "bc-tiny", "messages": []}):
            response = http.post("chat/completions", json=bad)
            assert response.status_code == 400 and "message" in response.json()["error"]
