"""Environment throughput and rollout-loop overhead.

    python benchmarks/bench_envs.py [--quick] [--envs sokoban,household] [--seed 0]

For every registered environment (`arena.envs.ENVS`, made with `arena.envs.make`; an env that
cannot be made is skipped with a message) plus the built-in instant `fake` env, prints:
- env steps/s under a random policy (uniform over the admissible actions, or over a few
  generic words when the env has no list) and under the expert (`env.expert_action()`); only
  the time inside env.reset/env.step counts; the expert's own time is reported apart;
- the rollout loop's own overhead per turn-sample, excluding generation: `rollout` is run with
  an instant fake `generate` that answers each env's expert action (random when the expert has
  none) as `<think>..</think><action>..</action>` with dummy token ids. `loop_us` excludes the
  env calls too (prompting, projection, bookkeeping, tensor building); `with_env_us` includes
  them; `tensor ids us` is `loop_us` when generate returns 1-D tensors instead of lists.
Prompts have 256 dummy ids and responses 64 (sizes of the embedded backend's order).
"""
from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Callable, Optional

import torch

from arena.agent.rollout import rollout

FALLBACK_ACTIONS = ("up", "down", "left", "right", "look", "answer 0")


class FakeEnv:
    """Instant env: 'go' moves on, the episode is won at position 5, max 8 turns."""

    name = "fake"
    instruction = "Say go five times."
    max_turns = 8

    def reset(self, seed):
        self.pos, self.turn = 0, 0
        return f"seed {seed} at 0", {"won": False, "admissible_actions": ["go", "wait"]}

    def step(self, action):
        self.turn += 1
        self.pos += action == "go"
        won = self.pos >= 5
        obs = f"at {self.pos}"
        return obs, 10.0 * won, won or self.turn >= self.max_turns, {"won": won, "admissible_actions": ["go", "wait"]}

    def is_admissible(self, action):
        return action in ("go", "wait")

    def expert_action(self):
        return "go"


def _pick(env, info: dict, policy: str, rng: random.Random) -> tuple[str, float]:
    """(action, seconds spent in the expert)."""
    if policy == "expert":
        t0 = time.perf_counter()
        action = env.expert_action()
        spent = time.perf_counter() - t0
        if action is not None:
            return action, spent
    return rng.choice(info.get("admissible_actions") or FALLBACK_ACTIONS), 0.0


def env_steps_per_second(make_env: Callable, policy: str, steps: int, seed: int = 0) -> dict:
    """Play episodes of seeds seed, seed+1, ... until `steps` env steps; time env calls only."""
    rng = random.Random(seed)
    env = make_env()
    env_seconds, expert_seconds, done_steps, episodes = 0.0, 0.0, 0, 0
    while done_steps < steps:
        t0 = time.perf_counter()
        _, info = env.reset(seed + episodes)
        env_seconds += time.perf_counter() - t0
        episodes += 1
        done = False
        while not done and done_steps < steps:
            action, spent = _pick(env, info, policy, rng)
            expert_seconds += spent
            t0 = time.perf_counter()
            _, _, done, info = env.step(action)
            env_seconds += time.perf_counter() - t0
            done_steps += 1
    return {
        "steps_per_s": done_steps / max(env_seconds, 1e-9),
        "expert_ms": 1e3 * expert_seconds / done_steps if policy == "expert" else 0.0,
        "episodes": episodes,
    }


class _Tracked:
    """Wraps an env so the fake `generate` knows which envs are still active (rollout asks the
    active envs in slot order) and can query each one's expert."""

    def __init__(self, env):
        self._env, self.done, self.turns, self.info = env, True, 0, {}

    def __getattr__(self, name):
        return getattr(self._env, name)

    def reset(self, seed):
        self.done, self.turns = True, 0
        obs, self.info = self._env.reset(seed)
        self.done = False
        return obs, self.info

    def step(self, action):
        self.done = True  # stays done if the step raises
        obs, reward, done, self.info = self._env.step(action)
        self.turns += 1
        self.done = bool(done) or self.turns >= getattr(self._env, "max_turns", 1 << 30)
        return obs, reward, done, self.info


def loop_overhead(make_env: Callable, batch_envs: int, group_size: int, *, seed: int = 0,
                  prompt_len: int = 256, response_len: int = 64, ids: str = "list") -> dict:
    """Per-turn-sample time of `rollout` outside `generate` (see the module docstring).
    ids: "list" (python int/float lists, the slower conversion) or "tensor" (1-D tensors)."""
    if ids not in ("list", "tensor"):
        raise ValueError(f"ids={ids!r}; valid: list, tensor")
    rng = random.Random(seed)
    tracked = [_Tracked(make_env()) for _ in range(batch_envs * group_size)]
    prompt_ids, token_ids, logp = [1] * prompt_len, [2] * response_len, [0.0] * response_len
    if ids == "tensor":
        prompt_ids, token_ids, logp = torch.tensor(prompt_ids), torch.tensor(token_ids), torch.tensor(logp)

    def generate(prompts):
        active = [t for t in tracked if not t.done]
        if len(active) != len(prompts):  # should not happen; stay usable
            active = [None] * len(prompts)
        out = []
        for env in active:
            action = _pick(env, env.info, "expert", rng)[0] if env is not None else "look"
            out.append((f"<think>ok</think><action>{action}</action>", prompt_ids, token_ids, logp))
        return out

    seeds = [seed + b for b in range(batch_envs)]
    _, stats = rollout(tracked, seeds, group_size, generate)
    samples = max(stats["n_turn_samples"], 1)
    return {
        "turn_samples": stats["n_turn_samples"],
        "loop_us": 1e6 * (stats["env_seconds"] - stats["env_call_seconds"]) / samples,
        "with_env_us": 1e6 * stats["env_seconds"] / samples,
        "success_rate": stats["success_rate"],
    }


def _registered_factories(names: Optional[list]) -> dict:
    from arena.envs import ENVS, make

    factories = {"fake": FakeEnv}
    for name in names or sorted(ENVS):
        if name == "fake":
            continue
        try:
            make(name)  # fail fast here, not inside a measurement
        except Exception as exc:  # noqa: BLE001 - report and skip
            print(f"[skip] {name}: cannot be made ({type(exc).__name__}: {exc})")
            continue
        factories[name] = lambda name=name: make(name)
    return factories


def main(argv: Optional[list] = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="few steps (smoke test)")
    parser.add_argument("--envs", default="", help="comma-separated names (default: all registered)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    steps, batch_envs, group_size = (50, 2, 2) if args.quick else (2000, 16, 8)
    names = [n for n in args.envs.split(",") if n] or None
    results = {}
    factories = _registered_factories(names)
    print(f"{'env':<10} {'random steps/s':>15} {'expert steps/s':>15} {'expert ms':>10} "
          f"{'loop us/sample':>15} {'+env us/sample':>15} {'tensor ids us':>14} {'samples':>8}")
    for name, make_env in factories.items():
        if names and name not in names:
            continue
        try:
            row = {
                "random": env_steps_per_second(make_env, "random", steps, args.seed),
                "expert": env_steps_per_second(make_env, "expert", steps, args.seed),
                "loop": loop_overhead(make_env, batch_envs, group_size, seed=args.seed),
                "loop_tensor": loop_overhead(make_env, batch_envs, group_size, seed=args.seed, ids="tensor"),
            }
        except Exception as exc:  # noqa: BLE001 - one broken env must not stop the benchmark
            print(f"[skip] {name}: failed during the benchmark ({type(exc).__name__}: {exc})")
            continue
        results[name] = row
        print(f"{name:<10} {row['random']['steps_per_s']:>15.0f} {row['expert']['steps_per_s']:>15.0f} "
              f"{row['expert']['expert_ms']:>10.3f} {row['loop']['loop_us']:>15.1f} "
              f"{row['loop']['with_env_us']:>15.1f} {row['loop_tensor']['loop_us']:>14.1f} "
              f"{row['loop']['turn_samples']:>8}")
    return results


if __name__ == "__main__":
    main(sys.argv[1:])
