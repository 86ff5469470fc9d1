"""`arena envs play|check`: the command functions (the main CLI parses keys and dispatches here).

Unknown environment names raise ValueError (from `arena.envs.make`), listing the valid ones;
the CLI maps that to exit code 2.
"""
from __future__ import annotations

import time
from typing import Callable

from . import make

QUIT_WORDS = ("q", "quit", "exit")
HINT_WORD = "?"


def play(env: str, seed: int, *, input_fn: Callable = input, print_fn: Callable = print, **env_kwargs) -> int:
    """Play one episode in the terminal. Each turn shows the observation and the admissible
    actions and reads one action line; `q` quits, `?` shows the expert's next action.
    Returns 0 (episode finished or quit)."""
    game = make(env, **env_kwargs)
    obs, info = game.reset(int(seed))
    print_fn(game.instruction)
    total, done, turn = 0.0, False, 0
    while not done:
        print_fn(f"\n--- turn {turn + 1}/{game.max_turns} ---\n{obs}")
        if info.get("admissible_actions"):
            print_fn(f"admissible actions: {', '.join(info['admissible_actions'])}")
        try:
            line = input_fn(f"action ({QUIT_WORDS[0]} quits, {HINT_WORD} hints)> ")
        except EOFError:
            line = QUIT_WORDS[0]
        if line.strip().lower() in QUIT_WORDS:
            print_fn(f"quit after {turn} turns, return {total:.2f}")
            return 0
        if line.strip() == HINT_WORD:
            print_fn(f"expert: {game.expert_action()}")
            continue
        if not game.is_admissible(line):
            print_fn(f"{line.strip()!r} is not an admissible action: a no-op turn")
        obs, reward, done, info = game.step(line)
        total += reward
        turn += 1
        print_fn(f"reward {reward:+.2f}, return {total:+.2f}")
    print_fn(f"\n{obs}\n{'won' if info.get('won') else 'lost'} after {turn} turns, return {total:+.2f}")
    return 0


def check(env: str, n: int = 100, *, print_fn: Callable = print, **env_kwargs) -> dict:
    """Run the expert on the training seeds 0..n-1 and report:

        success_rate      = (1/n) sum_i won_i
        mean_turns        = (1/n) sum_i turns_i
        mean_return       = (1/n) sum_i sum_t r_{i,t}
        steps_per_second  = sum_i turns_i / (seconds spent inside env.step)
    """
    if int(n) < 1:
        raise ValueError(f"check needs n >= 1 episodes, got {n}")
    game = make(env, **env_kwargs)
    if not callable(getattr(game, "expert_action", None)):
        raise ValueError(f"environment {env!r} has no expert_action(); check needs an expert")
    wins, turns, returns, step_seconds = 0, 0, 0.0, 0.0
    start = time.perf_counter()
    for seed in range(int(n)):
        _, info = game.reset(seed)
        done = False
        for _ in range(game.max_turns):
            action = game.expert_action()
            if action is None:  # the expert has no move: counts as a failed episode
                break
            t0 = time.perf_counter()
            _, reward, done, info = game.step(action)
            step_seconds += time.perf_counter() - t0
            turns += 1
            returns += reward
            if done:
                break
        wins += bool(done and info.get("won"))
    result = {
        "env": env,
        "n": int(n),
        "success_rate": wins / n,
        "mean_turns": turns / n,
        "mean_return": returns / n,
        "steps_per_second": turns / step_seconds if step_seconds > 0 else float("inf"),
        "wall_seconds": time.perf_counter() - start,
    }
    print_fn(
        f"{env}: expert success {result['success_rate']:.3f} over {n} seeds, "
        f"mean turns {result['mean_turns']:.2f}, mean return {result['mean_return']:.2f}, "
        f"{result['steps_per_second']:.0f} env steps/s ({result['wall_seconds']:.2f} s total)"
    )
    return result
