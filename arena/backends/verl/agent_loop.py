"""`ArenaAgentLoop`: one arena episode per verl prompt, registered as "arena_agent".

verl's `AgentLoopWorker` instantiates the loop once per prompt sample and awaits
`run(sampling_params, **row)`, where `row` is that sample's `non_tensor_batch` entries (the
dataset columns, `uid`, `index`, ...). The loop plays one episode of our environment with our
agent protocol, one LLM call per turn through verl's server handle:

    prompt_k = render_prompt(obs_k, history, k)                 (arena/agent/prompts.py)
    ids_k    = encode_prompt(tokenizer, prompt_k)   (as `arena eval`: the chat template when the
               tokenizer has one, a pretrained LLM's; else the raw text, as the embedded sampler)
    out_k    = await server_manager.generate(request_id, prompt_ids=ids_k,
                                             sampling_params + {max_tokens, stop: ["</action>"]})
    out_k    = out_k cut after the first token whose text completes a stop string
    text_k   = tokenizer.decode(out_k.token_ids, skip_special_tokens=True)
    project text_k, step the env, record the turn             (arena/agent/rollout._play_turn)

and returns one `AgentLoopOutput` (verl holds one sample per prompt) whose
`extra_fields["arena_turns"]` is the list of per-turn records (`TURN_KEYS`) and
`extra_fields["arena_episode"]` the trajectory values (`EPISODE_KEYS`). The trainer subclass
fans them out into one actor row per turn (`fan_out.py`). The output's own ids are the last
turn's (verl pads them into its per-prompt batch; they are not trained on);
`reward_score` = the episode return (so verl's reward loop is not called) and
`reward_extra_info["acc"]` = won (verl's validation reports it as `val-core/<src>/acc/mean@k`,
which `run_folder` maps to eval/success_rate).

Stop rule: the same as the embedded sampler's (arena/lm/sampler.py,
`StopStrings`): the response ends at the token after which its text contains a stop string
(`stop`, default `</action>`), however many tokens the tokenizer spells it with. The stop
strings go to the server as `sampling_params["stop"]` (vLLM's and arena's rollout honour it);
the loop cuts the returned ids by the same rule, so a server that overshoots cannot change
the per-turn rows.

Seed of the episode: the row's `arena_seed` (set by the trainer on resampling tries), else
`extra_info["seed"]`, else the row's `index`. Settings are keyword arguments of the
constructor; verl passes the extra keys of an `agent_loop_config_path` entry
(`{name: arena_agent, _target_: ..., env_name: sokoban, env_kwargs: {...}, ...}`) to it.
"""
from __future__ import annotations

import time
from typing import Any, Optional, Sequence
from uuid import uuid4

from verl.experimental.agent_loop.agent_loop import (
    AgentLoopBase,
    AgentLoopMetrics,
    AgentLoopOutput,
    _agent_loop_registry,
    register,
)

from arena.agent.rollout import _play_turn, _Trajectory, _turn_limit
from arena.lm.sampler import StopStrings
from arena.lm.tokenizer import encode_prompts
from arena.envs import make

from .verl_config import AGENT_LOOP_NAME

# one record per turn, in turn order
TURN_KEYS = ("anchor_obs", "turn_reward", "format_valid", "action_valid", "text", "prompt_ids", "response_ids", "logp")
# one per trajectory
EPISODE_KEYS = ("seed", "episode_return", "won", "errored", "penalty_coef", "errors")


def episode_seed(row: dict) -> int:
    """The row's task seed: `arena_seed`, else `extra_info["seed"]`, else `index`."""
    if row.get("arena_seed") is not None:
        return int(row["arena_seed"])
    extra = row.get("extra_info") or {}
    if isinstance(extra, dict) and extra.get("seed") is not None:
        return int(extra["seed"])
    if row.get("index") is not None:
        return int(row["index"])
    raise ValueError(f"arena_agent: the row has no task seed; give one of arena_seed, extra_info.seed, index "
                     f"(row keys: {sorted(row)})")


def _records(traj: _Trajectory) -> list[dict]:
    """The trajectory's rows as plain dicts (picklable: they cross Ray)."""
    out = []
    for anchor, reward, fmt, act, (text, prompt_ids, token_ids, logp) in traj.rows:
        out.append(dict(zip(TURN_KEYS, (anchor, float(reward), bool(fmt), bool(act), text,
                                        list(prompt_ids), list(token_ids), list(logp)))))
    return out


def encode_prompt(tokenizer, prompt: str) -> list[int]:
    """A turn's prompt ids, encoded as `arena eval` encodes them (LocalModel.encode,
    arena/evaluation/local_model.py), so training and eval prompts are the same: one user message
    in the tokenizer's chat template when it has one (a pretrained LLM's, as the authors' setup
    uses it), else the raw text (arena's own tokenizers have none: CPU runs are unchanged)."""
    return encode_prompts(tokenizer, [prompt])[0]


class ArenaAgentLoop(AgentLoopBase):
    def __init__(self, *args, env_name: str = "sokoban", env_kwargs: Optional[dict] = None,
                 penalty_coef: float = 0.1, history_length: int = 2, template: str = "compact",
                 max_turns: Optional[int] = None, max_new_tokens: Optional[int] = None,
                 stop: Sequence[str] = ("</action>",), **kwargs):
        super().__init__(*args, **kwargs)
        self.env = make(env_name, **dict(env_kwargs or {}))
        self.penalty_coef, self.history_length, self.template = float(penalty_coef), int(history_length), template
        self.max_turns = max_turns
        self.max_new_tokens = int(max_new_tokens or self.rollout_config.response_length)
        self.stop = StopStrings(self.tokenizer, list(stop)) if stop else None

    async def run(self, sampling_params: dict[str, Any], **row) -> AgentLoopOutput:
        seed = episode_seed(row)
        traj = _Trajectory(self.env, seed, 0, _turn_limit(self.env, self.max_turns))
        errors: list[str] = []
        traj.reset(errors)  # env failures are isolated, as in rollout.py
        params = {**sampling_params, "max_tokens": self.max_new_tokens}
        if self.stop is not None:
            params["stop"] = list(self.stop.stops)
        request_id = uuid4().hex  # one sticky session per episode
        generate_seconds, turn = 0.0, 0
        last_prompt, last_response, last_logp = [], [], []
        while not traj.done and turn < traj.limit:
            prompt = traj.prompt(turn, history_length=self.history_length, template=self.template)
            prompt_ids = encode_prompt(self.tokenizer, prompt)
            t0 = time.perf_counter()
            out = await self.server_manager.generate(request_id, prompt_ids=prompt_ids, sampling_params=params)
            generate_seconds += time.perf_counter() - t0
            token_ids = list(out.token_ids)[: self.max_new_tokens]
            if self.stop is not None:
                token_ids = token_ids[: self.stop.cut(token_ids)]
            logp = list(out.log_probs)[: len(token_ids)] if out.log_probs else [0.0] * len(token_ids)
            text = self.tokenizer.decode(token_ids, skip_special_tokens=True)
            _play_turn(traj, (text, prompt_ids, token_ids, logp), turn, errors)
            last_prompt, last_response, last_logp = prompt_ids, token_ids, logp
            turn += 1
        episode = dict(zip(EPISODE_KEYS, (seed, float(traj.episode_return), bool(traj.won), bool(traj.errored),
                                          self.penalty_coef, errors)))
        return AgentLoopOutput(
            prompt_ids=self._cap_text_prompt_length(list(last_prompt)),
            response_ids=list(last_response),
            response_mask=[1] * len(last_response),
            response_logprobs=list(last_logp) if sampling_params.get("logprobs") else None,
            reward_score=0.0 if traj.errored else float(traj.episode_return),
            num_turns=2 * len(traj.rows),
            metrics=AgentLoopMetrics(generate_sequences=generate_seconds),
            extra_fields={"arena_turns": _records(traj), "arena_episode": episode,
                          "reward_extra_info": {"acc": float(traj.won)}, "turn_scores": [], "tool_rewards": []},
        )


def _target() -> str:
    return f"{ArenaAgentLoop.__module__}.{ArenaAgentLoop.__qualname__}"


def register_agent_loop() -> None:
    """Put "arena_agent" in verl's agent-loop registry unless an entry for this class is there.

    The entry verl's AgentLoopWorker loads from `agent_loop_config_path` carries the
    constructor keywords (env_name, env_kwargs, template, ...). The worker imports this module
    only when `hydra.utils.instantiate` resolves `_target_` for the first episode; verl's own
    `@register` would then replace that entry by a bare `{_target_}`, and every later episode
    would play the constructor defaults (another board size, another prompt template)."""
    entry = _agent_loop_registry.get(AGENT_LOOP_NAME)
    if entry is None or entry.get("_target_") != _target():
        register(AGENT_LOOP_NAME)(ArenaAgentLoop)


register_agent_loop()


def is_registered() -> bool:
    """True iff verl's agent-loop registry maps AGENT_LOOP_NAME to this class."""
    entry = _agent_loop_registry.get(AGENT_LOOP_NAME) or {}
    return entry.get("_target_") == _target()
