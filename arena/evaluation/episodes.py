"""One evaluation episode -> one result record, cached as `<run>/episodes/<index>.json`
(docs/eval.md, Run folder). A record is written atomically once its episode is complete, so
a rerun after a crash skips it: no episode is paid for twice. An episode still in flight
appends each turn's decision to `<index>.partial.jsonl` as it arrives; a rerun replays those
decisions (the environment is deterministic given its seed and the actions, and each line
carries a hash of its prompt to prove it) and asks the API only for the turns after them, so a
kill loses at most the replies that were in flight at that moment.

The chat loop below plays an episode turn by turn exactly as the training rollout does
(arena/agent/rollout.py): same prompt (render_prompt with the same history window and
template), same projection, same stopping rule (done, or env.max_turns turns), same
isolation of environment errors (the episode ends lost). Only the policy differs: each turn's
response comes from `decide(prompt)`, a paradigm (arena/evaluation/debate.py).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Callable, Optional

from arena.agent.projection import extract_action, project
from arena.agent.prompts import render_prompt, task_from_obs
from arena.io.atomic import append_text, atomic_write_json, atomic_write_text, remove_temps_of_killed_writes

from .client import Reply
from .debate import TurnDecision

EPISODES_DIR = "episodes"
TOTALS = ("won", "episode_return", "turns", "format_valid_turns", "action_valid_turns", "malformed_replies",
          "requests", "retries", "prompt_tokens", "completion_tokens")


def episode_file(run_path: Path, index: int) -> Path:
    return Path(run_path) / EPISODES_DIR / f"{index:07d}.json"


def turn_log_file(run_path: Path, index: int) -> Path:
    return Path(run_path) / EPISODES_DIR / f"{index:07d}.partial.jsonl"


def load_cached(run_path: Path, eval_id: Optional[str] = None) -> dict[int, dict]:
    """Every complete episode record in the run folder, by episode index; with `eval_id`, only
    the records that eval wrote (a record naming another eval is never adopted)."""
    out = {}
    for path in sorted((Path(run_path) / EPISODES_DIR).glob("*.json")):
        record = json.loads(path.read_text())
        if eval_id is not None and record.get("eval_id", eval_id) != eval_id:
            continue
        out[int(record["episode"])] = record
    return out


def foreign_episodes(run_path: Path, eval_id: str) -> list[str]:
    """The cached episode files (complete or partial) of `run_path` that do not carry `eval_id`:
    an eval folder without its config.yaml holds no proof that they are this eval's."""
    folder = Path(run_path) / EPISODES_DIR
    foreign = []
    for path in sorted(folder.glob("*.json")):
        try:
            owner = json.loads(path.read_text()).get("eval_id")
        except (OSError, ValueError, AttributeError):
            owner = None
        if owner != eval_id:
            foreign.append(path.name)
    return foreign + sorted(p.name for p in folder.glob("*.partial.jsonl"))


def drop_leftovers_of_kills(run_path: Path, finished) -> None:
    """What a killed eval leaves in its episodes folder, deleted before a rerun plays (the caller holds
    the eval folder's lock, so no other process writes there):
    - the turn logs of the episodes `finished` (whose records are cached): a kill between writing an
      episode's record and deleting its log leaves the log, stale (the record holds every turn in it);
    - the hidden temp file of a record whose atomic write was killed before its rename."""
    for index in finished:
        turn_log_file(run_path, index).unlink(missing_ok=True)
    remove_temps_of_killed_writes(Path(run_path) / EPISODES_DIR)


def write_episode(run_path: Path, record: dict, eval_id: Optional[str] = None) -> None:
    """Cache one complete record; `eval_id` is written into it (the report pools by it)."""
    if eval_id is not None:
        record["eval_id"] = eval_id
    atomic_write_json(episode_file(run_path, record["episode"]), record)


def new_record(index: int, seed: int) -> dict:
    return {"episode": index, "seed": seed, "won": False, "episode_return": 0.0, "turns": 0,
            "format_valid_turns": 0, "action_valid_turns": 0, "malformed_replies": 0, "requests": 0, "retries": 0,
            "prompt_tokens": 0, "completion_tokens": 0, "usage_missing": 0, "actions": [], "env_error": None,
            "replayed_turns": 0}


class TurnLog:
    """The decisions of one unfinished episode, one JSON line per turn (module docstring)."""

    def __init__(self, run_path: Path, index: int):
        self.path = turn_log_file(run_path, index)
        self.pending: list[dict] = []
        self.replayed = 0
        if not self.path.exists():
            return
        text = self.path.read_text()
        for line in text.splitlines():
            try:
                self.pending.append(json.loads(line))
            except json.JSONDecodeError:  # a torn last line from a killed writer
                break
        if not text.endswith("\n") or len(self.pending) != len(text.splitlines()):
            atomic_write_text(self.path, "".join(json.dumps(row) + "\n" for row in self.pending))

    def decide(self, prompt: str, decide: Callable[[str], TurnDecision]) -> TurnDecision:
        key = hashlib.sha256(prompt.encode()).hexdigest()[:16]
        if self.pending and self.pending[0]["prompt_sha"] == key:
            row = self.pending.pop(0)
            self.replayed += 1
            return TurnDecision(row["text"], [[Reply(**r) for r in rnd] for rnd in row["replies"]], row["chosen_agent"])
        if self.pending:  # the episode went another way: the rest of the log is stale
            self.pending = []
            self._rewrite_kept()
        decision = decide(prompt)
        row = {"prompt_sha": key, "text": decision.text, "chosen_agent": decision.chosen_agent,
               "replies": [[asdict(r) for r in rnd] for rnd in decision.replies]}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        append_text(self.path, json.dumps(row) + "\n")  # never through a symlink
        return decision

    def _rewrite_kept(self) -> None:
        """Keep only the lines replayed so far (atomically)."""
        lines = self.path.read_text().splitlines()[: self.replayed]
        atomic_write_text(self.path, "".join(line + "\n" for line in lines))

    def finish(self) -> None:
        self.path.unlink(missing_ok=True)


def _add_replies(record: dict, decision: TurnDecision) -> None:
    for reply in decision.all_replies():
        record["requests"] += 1
        record["retries"] += reply.retries
        record["prompt_tokens"] += reply.prompt_tokens
        record["completion_tokens"] += reply.completion_tokens
        record["malformed_replies"] += int(reply.malformed)
        record["usage_missing"] += int(reply.usage_missing)


def play_chat_episode(env, index: int, seed: int, decide: Callable[[str], TurnDecision], *, history_length: int,
                      template: str, keep_debate: bool = False, turn_log: Optional[TurnLog] = None) -> dict:
    """Play one episode with a chat policy; return its record (module docstring). An
    ApiFailure from `decide` propagates: the episode is then not complete and not cached.
    With a turn_log, decisions of an earlier, interrupted attempt are replayed first."""
    if turn_log is not None:
        ask = decide
        decide = lambda prompt: turn_log.decide(prompt, ask)  # noqa: E731
    record = new_record(index, seed)
    if keep_debate:
        record["debate"] = []
    try:
        obs, info = env.reset(seed)
    except Exception as exc:  # noqa: BLE001 - an env failure ends the episode, lost (as in the rollout loop)
        record["env_error"] = f"reset: {type(exc).__name__}: {exc}"
        return record
    admissible, task = info.get("admissible_actions"), str(info.get("task") or task_from_obs(obs))
    history: list[tuple[str, str]] = []
    name, instruction = getattr(env, "name", ""), getattr(env, "instruction", "")
    for turn in range(int(env.max_turns)):
        prompt = render_prompt(name, instruction, obs, history, turn, admissible, task=task,
                               history_length=history_length, template=template)
        decision = decide(prompt)
        _add_replies(record, decision)
        if keep_debate:
            record["debate"].append({"proposals": decision.proposals(), "chosen_agent": decision.chosen_agent})
        record["turns"] += 1
        try:
            projected = project(decision.text, env.is_admissible)
            record["actions"].append(projected.action)
            record["format_valid_turns"] += int(projected.format_valid)
            record["action_valid_turns"] += int(projected.action_valid)
            next_obs, reward, done, info = env.step(projected.action)
        except Exception as exc:  # noqa: BLE001
            record["env_error"] = f"step {turn}: {type(exc).__name__}: {exc}"
            record["won"], record["episode_return"] = False, 0.0
            return record
        history.append((obs, projected.action))
        record["episode_return"] += float(reward)
        record["won"] = bool(info.get("won", False))
        obs, admissible = next_obs, info.get("admissible_actions")
        if done:
            break
    return record


def records_from_batch(batch, indices: list[int], seeds: list[int], env_errors: list[str],
                       first_traj_id: int = 0) -> list[dict]:
    """Episode records from a rollout's per-turn batch (one trajectory per seed, group size 1):
    tokens are the prompt and response tokens the model actually processed."""
    records = [new_record(i, s) for i, s in zip(indices, seeds)]
    prompt_len = batch.prompt_mask.sum(dim=1).tolist() if len(batch) else []  # [N]
    response_len = batch.response_mask.sum(dim=1).tolist() if len(batch) else []  # [N]
    for row in range(len(batch)):
        rec = records[int(batch.traj_id[row]) - first_traj_id]
        rec["turns"] += 1
        rec["requests"] += 1
        rec["format_valid_turns"] += int(batch.format_valid[row])
        rec["action_valid_turns"] += int(batch.action_valid[row])
        rec["prompt_tokens"] += int(prompt_len[row])
        rec["completion_tokens"] += int(response_len[row])
        rec["actions"].append(extract_action(batch.response_text[row]))
        rec["won"] = bool(batch.won[row])
        rec["episode_return"] = float(batch.episode_return[row])
    for rec in records:
        marker = f"seed={rec['seed']},"
        rec["env_error"] = next((e for e in env_errors if marker in e), None)
    return records


def totals(records: list[dict]) -> dict:
    """Sums over episodes of the counters in TOTALS (won counts the won episodes)."""
    return {key: sum(float(r[key]) if key == "episode_return" else int(r[key]) for r in records) for key in TOTALS}


def success_ci(wins: int, n: int, level: float = 0.95) -> Optional[tuple[float, float]]:
    """Wilson score interval of a binomial proportion (scipy), or None when n = 0."""
    if n == 0:
        return None
    from scipy.stats import binomtest

    ci = binomtest(wins, n).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)
