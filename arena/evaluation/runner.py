"""`arena eval key=value ...`: evaluate a policy on held-out episodes into a run folder
(docs/eval.md). Exit codes: 0 every episode done (summary.json written); 1 some episode failed
(API failure after the last retry, or a crash: error.txt lists them, the done ones stay
cached and a rerun plays only the rest), every reply of the endpoint was malformed (error.txt
names it; the episodes played with them are set aside, not cached), or another `arena eval`
of the same eval holds its folder's lock (nothing is paid twice); 2 bad input.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Callable, Optional

import yaml

from arena.agent.rollout import rollout
from arena.cli_errors import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK
from arena.config import BadConfig, load_config, to_plain
from arena.config.args import BadArgument
from arena.config.verb_args import EvalArgs
from arena.config.verb_grammar import Parsed
from arena.envs import EnvUnavailableError, announce_first_use, eval_seed, eval_size, make
from arena.io.atomic import atomic_write_text
from arena.runs import RunFolder
from arena.runs.lock import CellLock
from arena.runs.provenance import provenance
from arena.runs.run_log import recording

from .client import ApiFailure, BadApiKey, ChatClient
from .debate import debate_turn, sla_turn
from .episodes import (EPISODES_DIR, TurnLog, drop_leftovers_of_kills, episode_file, foreign_episodes,
                       load_cached, play_chat_episode, records_from_batch, success_ci, totals, turn_log_file,
                       write_episode)
from .options import BadEvalInput, checked_args, checkpoint_dir, eval_dir, eval_id, pool_id, recorded



def prepare(parsed: Parsed[EvalArgs]):
    """(resolved run config, checked EvalArgs) from the parsed command line: EvalArgs and the run
    config keys ({dotted key: value}; `n` is eval.n)."""
    args = parsed.args
    overrides = {("eval.n" if key == "n" else key): value for key, value in parsed.overrides.items()}
    if args.policy == "openai" and "model.prompt_template" not in overrides:
        overrides["model.prompt_template"] = "full"  # an instruction-following model needs the full wording
    try:
        cfg = load_config(overrides)
    except BadConfig as exc:
        raise BadEvalInput(str(exc)) from exc
    if int(cfg.seed) < 0 or int(cfg.eval.n) < 1:
        raise BadEvalInput(f"need seed >= 0 (the first held-out episode) and n >= 1; got seed={cfg.seed}, n={cfg.eval.n}")
    if not isinstance(args.make_pool, bool):
        raise BadEvalInput(f"make_pool={args.make_pool!r}; valid: true, false")
    try:  # a long first-use generation (household's large pool) is said up front, and needs make_pool=true unattended
        announce_first_use(str(cfg.env.name), to_plain(cfg.env.kwargs), consent=args.make_pool)
    except EnvUnavailableError as exc:
        raise BadEvalInput(str(exc)) from exc
    size = eval_size(str(cfg.env.name), **to_plain(cfg.env.kwargs))  # episodes i >= size would replay i mod size
    if size is not None and int(cfg.seed) + int(cfg.eval.n) > size:
        raise BadEvalInput(f"seed={cfg.seed} n={cfg.eval.n} asks for held-out episodes past the {size} distinct ones of "
                           f"env {cfg.env.name} (env.kwargs={to_plain(cfg.env.kwargs)}); valid: seed + n <= {size}")
    if cfg.model.path and args.policy == "checkpoint":
        cfg.model.path = str(checkpoint_dir(str(cfg.model.path)))  # a run folder -> its final policy
    return cfg, checked_args(args, cfg)


class Progress:
    """Prints a line every ~10% of the episodes, and at the end."""

    def __init__(self, total: int, log: Callable):
        self.total, self.log, self.done, self.won, self.retries = total, log, 0, 0, 0
        self.every, self.lock, self.start = max(1, total // 10), threading.Lock(), time.time()

    def add(self, records: list[dict]) -> None:
        with self.lock:
            before = self.done
            self.done += len(records)
            self.won += sum(int(r["won"]) for r in records)
            self.retries += sum(int(r["retries"]) for r in records)
            if self.done // self.every > before // self.every or self.done == self.total:
                self.log(f"[eval] {self.done}/{self.total} episodes, success so far {self.won / self.done:.3f}, "
                         f"retries {self.retries}, {time.time() - self.start:.0f}s")


def run_checkpoint(cfg, options: EvalArgs, path: Path, pending: list[int], progress: Progress) -> dict[int, str]:
    """Batched greedy/sampled rollouts of a local checkpoint, `chunk` episodes at a time."""
    # lazy: keeps tokenizers, transformers out of this module's import
    from .local_model import LocalModel

    local = LocalModel(cfg.model.path, device=cfg.device)
    policy = local.policy(temperature=cfg.eval.temperature, top_p=cfg.eval.top_p,
                          max_new_tokens=options.max_tokens, seed=int(cfg.seed))
    envs = [make(cfg.env.name, **to_plain(cfg.env.kwargs)) for _ in range(min(options.chunk, len(pending)))]
    for start in range(0, len(pending), options.chunk):
        indices = pending[start : start + options.chunk]
        seeds = [eval_seed(i) for i in indices]
        batch, stats = rollout(envs, seeds, 1, policy, penalty_coef=cfg.env.penalty_coef,
                               history_length=cfg.env.history_length, pad_id=local.pad_id,
                               template=cfg.model.prompt_template)
        records = records_from_batch(batch, indices, seeds, stats["env_errors"])
        for record in records:
            write_episode(path, record, eval_id(cfg, options))
        progress.add(records)
    return {}


def make_client(cfg, options: EvalArgs) -> ChatClient:
    try:
        return ChatClient(options.base_url, options.model, api_key_env=options.api_key_env, timeout=options.timeout,
                          max_retries=options.retry.max, backoff=options.retry.backoff, max_wait=options.retry.max_wait,
                          max_tokens=options.max_tokens, max_tokens_field=options.max_tokens_field,
                          temperature=float(cfg.eval.temperature) if options.sampling_params else None,
                          top_p=float(cfg.eval.top_p) if options.sampling_params else None,
                          concurrency=options.concurrency)
    except KeyError:
        raise BadEvalInput(f"api_key_env={options.api_key_env}: that environment variable is not set; export the "
                           "key there (never pass it as an argument), or api_key_env= (empty) for a server without "
                           "authentication") from None
    except BadApiKey as exc:  # names the variable, never the value
        raise BadEvalInput(str(exc)) from None


class SerialEnv:
    """An environment whose calls hold one lock shared by all episode threads: environments
    need not be thread-safe (TextWorld's parser is not), and their steps are cheap next to an
    API call, so only the requests run concurrently."""

    LOCK = threading.Lock()

    def __init__(self, name: str, kwargs: dict):
        with self.LOCK:
            self.env = make(name, **kwargs)
        self.name, self.max_turns = self.env.name, self.env.max_turns
        self.instruction = getattr(self.env, "instruction", "")

    def reset(self, seed: int):
        with self.LOCK:
            return self.env.reset(seed)

    def step(self, action: str):
        with self.LOCK:
            return self.env.step(action)

    def is_admissible(self, action: str) -> bool:
        with self.LOCK:
            return self.env.is_admissible(action)


def run_chat(cfg, options: EvalArgs, client: ChatClient, path: Path, pending: list[int],
             progress: Progress) -> dict[int, str]:
    """Episodes in a pool of `concurrency` threads; each episode's requests go one at a time,
    so at most `concurrency` requests are in flight. Returns {episode: failure message}."""
    local = threading.local()  # one environment per worker thread

    def play(index: int) -> dict:
        if not hasattr(local, "env"):
            local.env = SerialEnv(cfg.env.name, to_plain(cfg.env.kwargs))
        tag = f"{eval_id(cfg, options)}:{index}"

        def agent(prompt: str):
            return client.chat(prompt, tag=tag)

        if options.paradigm == "sla":
            decide = lambda prompt: sla_turn(prompt, agent)  # noqa: E731
        else:
            agents = [agent] * options.debate.agents
            decide = lambda prompt: debate_turn(prompt, agents, options.debate.rounds, options.paradigm)  # noqa: E731
        turn_log = TurnLog(path, index)
        record = play_chat_episode(local.env, index, eval_seed(index), decide, history_length=cfg.env.history_length,
                                   template=cfg.model.prompt_template, keep_debate=options.paradigm != "sla",
                                   turn_log=turn_log)
        record["replayed_turns"] = turn_log.replayed
        write_episode(path, record, eval_id(cfg, options))
        turn_log.finish()
        return record

    failures = {}
    pool = ThreadPoolExecutor(max_workers=options.concurrency)
    try:
        futures = {pool.submit(play, index): index for index in pending}
        for future in as_completed(futures):
            try:
                progress.add([future.result()])
            except ApiFailure as exc:
                failures[futures[future]] = str(exc)
            except Exception as exc:  # noqa: BLE001 - any other error fails this episode only
                failures[futures[future]] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    finally:  # on Ctrl-C, do not start the episodes still queued
        pool.shutdown(wait=True, cancel_futures=True)
    return failures


def build_eval_summary(cfg, options: EvalArgs, records: list[dict], wall_seconds: float) -> dict:
    """summary.json of an eval run: the training summary's fields that apply (docs/design.md,
    Run folder: final_eval_success, n_eval) plus what an eval measures."""
    n, sums = len(records), totals(records)
    success = sums["won"] / n
    turns = max(1, sums["turns"])
    ci = success_ci(sums["won"], n)
    return {
        "status": "done", "kind": "eval", "eval_id": eval_id(cfg, options), "pool_id": pool_id(cfg, options),
        "final_eval_success": success, "initial_eval_success": success, "success_ci95": list(ci) if ci else None,
        "n_eval": n, "steps": 0, "wall_seconds": wall_seconds,
        "policy": options.policy, "paradigm": options.paradigm, "label": options.label, "env": cfg.env.name,
        "first_episode": int(cfg.seed),
        "temperature": float(cfg.eval.temperature) if options.sampling_params or options.policy == "checkpoint" else None,
        "format_valid_ratio": sums["format_valid_turns"] / turns, "action_valid_ratio": sums["action_valid_turns"] / turns,
        "mean_turns": sums["turns"] / n, "mean_episode_return": sums["episode_return"] / n,
        "requests": sums["requests"], "retries": sums["retries"], "malformed_replies": sums["malformed_replies"],
        "prompt_tokens": sums["prompt_tokens"], "completion_tokens": sums["completion_tokens"],
        "tokens_per_episode": (sums["prompt_tokens"] + sums["completion_tokens"]) / n,
        "env_errors": sum(1 for r in records if r.get("env_error")),
        **provenance(),
    }


def write_config(run: RunFolder, cfg, options: EvalArgs) -> None:
    """config.yaml: the resolved run config plus an `evaluation` block. Refuses (exit 2) a
    folder that holds an eval of another config, so cached episodes never mix."""
    ident = eval_id(cfg, options)
    if run.config_file.exists():
        old = yaml.safe_load(run.config_file.read_text()) or {}
        old_id = (old.get("evaluation") or {}).get("eval_id")
        if old_id != ident:
            raise BadEvalInput(f"out={run.path} holds another run (eval_id {old_id}, this one {ident}); "
                               "choose another out= or delete that folder")
    else:  # no config.yaml: cached files are this eval's only if each says so
        foreign = foreign_episodes(run.path, ident)
        if foreign:
            raise BadEvalInput(f"out={run.path} has no {run.config_file.name} but holds {len(foreign)} cached episode "
                               f"file(s) (e.g. episodes/{foreign[0]}) that do not name this eval ({ident}): no proof "
                               "they are its episodes; choose another out= or move that folder away")
    plain = to_plain(cfg)
    plain["evaluation"] = {**recorded(options), "eval_id": ident}
    atomic_write_text(run.config_file, yaml.safe_dump(plain, sort_keys=False))


def eval_summary(run: RunFolder) -> Optional[dict]:
    """The eval's summary.json when it is a finished eval's (valid for its kind, "eval":
    arena.runs.layout.SUMMARY_FIELDS_BY_KIND), else None."""
    summary = run.summary()
    return summary if summary is not None and summary.get("kind") == "eval" else None


def already_done(cfg, options: EvalArgs, run: RunFolder) -> bool:
    """True when `run`'s summary.json is this eval's: the same eval id, n and first episode."""
    done = eval_summary(run)
    return bool(done and done.get("n_eval") == int(cfg.eval.n) and done.get("first_episode") == int(cfg.seed)
                and done.get("eval_id") == eval_id(cfg, options))


def set_aside_stale_summary(run: RunFolder) -> None:
    """A summary.json of another n or episode range (or another eval): moved to
    summary.json.superseded-<time> before this eval plays, so a failed rerun never leaves the
    old "done" summary standing beside its error.txt (kept, not deleted)."""
    if run.summary_file.exists():
        target = run.path / f"{run.summary_file.name}.superseded-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        os.replace(run.summary_file, target)


def set_aside_malformed(run: RunFolder, options: EvalArgs, played: list[int], log: Callable) -> int:
    """Every reply of this run was malformed: the episodes played with them (complete or
    partial) move to episodes.malformed-<time>/, error.txt names the cause; exit 1."""
    target = run.path / f"{EPISODES_DIR}.malformed-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    for index in played:
        for path in (episode_file(run.path, index), turn_log_file(run.path, index)):
            if path.exists():
                target.mkdir(parents=True, exist_ok=True)
                os.replace(path, target / path.name)
    run.write_error(f"every reply from {options.base_url} (model {options.model}) was malformed: HTTP 200 with a body "
                    "that is not chat-completions JSON. The endpoint is broken or not OpenAI-compatible (check "
                    f"base_url); no summary was written and the episodes played with those replies were set aside in "
                    f"{target.name}/. Fix the endpoint and rerun the same command.\n")
    log(f"[eval] failed: every reply was malformed (not chat-completions JSON); see {run.error_file}")
    return EXIT_FAILED


def eval_main(parsed: Parsed[EvalArgs], log: Callable = print) -> int:
    """`arena eval` of one policy (module docstring); `parsed`: EvalArgs, the keys given, and the
    run config keys. `arena eval sweep=NAME` goes through arena.evaluation.entry, which calls
    this per cell."""
    if "min_effect" in parsed.given:
        print("arena eval: min_effect= compares a sweep's arms; it needs sweep=NAME", file=sys.stderr)
        return EXIT_BAD_INPUT
    t0, client = time.time(), None
    try:
        cfg, options = prepare(parsed)
        client = make_client(cfg, options) if options.policy == "openai" else None  # checks the key variable
        run = RunFolder(eval_dir(cfg, options))
        run.path.mkdir(parents=True, exist_ok=True)
        write_config(run, cfg, options)
    except BadArgument as exc:  # BadEvalInput, or EvalArgs.checked's
        print(f"arena eval: {exc}", file=sys.stderr)
        if client is not None:
            client.close()
        return EXIT_BAD_INPUT
    try:
        with CellLock(run.path) as held:  # the lock a sweep cell's job takes (arena/runs/lock.py)
            if not held:
                log(f"[eval] another arena eval is running this eval in {run.path} (its lock is held): it pays for "
                    "these episodes; rerun this command after it ends to read its result")
                return EXIT_FAILED
            if already_done(cfg, options, run):  # nothing plays, so command.txt and run.log stay as they are
                log(f"[eval] already done: {run.summary_file}")
                return EXIT_OK
            with recording(run.path):  # command.txt and run.log, as every run folder (arena.runs.run_log)
                return play_eval(cfg, options, client, run, t0, log)
    finally:
        if client is not None:
            client.close()


def play_eval(cfg, options: EvalArgs, client, run: RunFolder, t0: float, log: Callable) -> int:
    """The body of eval_main, run while this process holds the eval folder's lock and the eval is
    not already done."""
    ident = eval_id(cfg, options)
    set_aside_stale_summary(run)
    indices = [int(cfg.seed) + i for i in range(int(cfg.eval.n))]
    cached = load_cached(run.path, ident)
    drop_leftovers_of_kills(run.path, cached)
    pending = [i for i in indices if i not in cached]
    log(f"[eval] {options.label} / {options.paradigm} on {cfg.env.name}: {len(indices)} episodes "
        f"({len(indices) - len(pending)} cached, {len(pending)} to play) -> {run.path}")
    progress = Progress(len(pending), log)
    redact = client.redact if client is not None else str  # every form of the key, in what is written
    try:
        if options.policy == "checkpoint":
            failures = run_checkpoint(cfg, options, run.path, pending, progress)
        else:
            failures = run_chat(cfg, options, client, run.path, pending, progress)
    except Exception:  # noqa: BLE001 - any crash: keep the cached episodes, report, exit 1
        run.write_error(redact(traceback.format_exc()))
        log(f"[eval] failed; traceback in {run.error_file} (finished episodes are cached: rerun to continue)")
        return EXIT_FAILED
    if client is not None and client.all_malformed():
        return set_aside_malformed(run, options, pending, log)
    if failures:
        lines = [f"episode {i} (seed {eval_seed(i)}): {msg}" for i, msg in sorted(failures.items())]
        run.write_error(redact(f"{len(failures)} of {len(indices)} episodes failed; rerun the same command to "
                               "retry them (the others are cached)\n" + "\n".join(lines) + "\n"))
        log(f"[eval] {len(failures)} episode(s) failed (see {run.error_file}); "
            f"{len(indices) - len(failures)} done and cached")
        return EXIT_FAILED
    wanted = set(indices)
    records = [r for i, r in sorted(load_cached(run.path, ident).items()) if i in wanted]
    summary = build_eval_summary(cfg, options, records, time.time() - t0)
    run.write_summary(summary)
    ci = summary["success_ci95"]
    log(f"[eval] success {summary['final_eval_success']:.3f} (95% CI {ci[0]:.3f}-{ci[1]:.3f}, n={summary['n_eval']}), "
        f"{summary['tokens_per_episode']:.0f} tokens/episode, {summary['retries']} retries -> {run.summary_file}")
    return EXIT_OK
