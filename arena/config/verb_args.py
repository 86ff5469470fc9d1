"""Each verb's own keys (docs/design.md, CLI grammar and exit codes): the fields of its argument
dataclass (`SweepArgs`, `SearchArgs`, `TrainArgs`, `StatusArgs`, `ReportArgs`, `FindingsArgs`,
`MethodsArgs`, `EnvsArgs`, `EvalArgs`, `ServeArgs`), read from a command line by the one grammar
of arena.config.verb_grammar (`parse_args`; `eval` and `serve`, whose keys are dotted sections,
by `parse_nested_args`), which passes every other key through as a run config override.

A comment beside (or above) a field is its `--help` text (arena.config.field_docs); `--help`
lists the fields with their type and default (arena.cli_help). Pure and light: no torch.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from .args import BadArgument
from .schema import RunConfig
from .verb_grammar import verb_keys


@dataclass
class CellsArgs:
    """The keys `arena sweep` and `arena search` share: which cells, how they are launched."""
    env: Any = "sokoban"  # the environments, one or a list: env=[sokoban,household]
    envs: Any = None  # another spelling of env=[...] (give one of the two)
    seeds: Any = 3  # a count (3 = seeds 0-2), a list ([0,5,9]), or auto: seeds in rounds until each comparison is resolved (max_seeds)
    max_seeds: Optional[int] = None  # with seeds=auto: seeds per arm at most, an integer >= 2 (default 10); 3 first, then one per round to unresolved arms
    min_effect: Optional[float] = None  # with seeds=auto: the difference in points a "no difference" must rule out (default 5)
    launcher: str = "local"  # configs/launcher/<name>.yaml: local | debug | slurm | ...
    fail_fast: bool = False  # stop launching cells after the first failed one
    name: Optional[str] = None  # the sweep's folder under results_dir/sweeps; default <dimension>-<budget>
    timeout_min: Optional[int] = None  # minutes a cell may run (the launcher's timeout_min when unset)
    progress_s: float = 30.0  # seconds between progress lines
    dry_run: bool = False  # print the plan (cells, BC stages, launcher, wall-time estimate); write nothing (--dry-run)
    reuse: bool = True  # copy a cell another sweep under results_dir finished with the same config and code, instead of training it again


@dataclass
class SweepArgs(CellsArgs):
    """`arena sweep`: a grid of arms x envs x seeds."""
    dimension: Optional[str] = None  # the grid of arms: arena/sweeps/grids/<dimension>.yaml (or one in $ARENA_GRIDS)
    grid: Optional[str] = None  # a grid file of your own instead of dimension=


@dataclass
class SearchArgs(CellsArgs):
    """`arena search`: a one-arm sweep of one method with the stability search on."""
    method: Optional[str] = None  # the preset to search (required; any case: SAPO_SM = sapo_sm)


@dataclass
class TrainArgs:
    """`arena train`: its own keys; every other key is a run config key."""
    dry_run: bool = False  # print the run's config (backend=verl: the verl config it writes, as YAML); run and write nothing (--dry-run)
    launcher: Optional[str] = None  # backend=verl on SLURM: a slurm launcher (configs/launcher/) to submit the multi-node script with; none = run here
    nodes: int = 1  # with launcher=: the nodes of the multi-node job, an integer >= 1


@dataclass
class StatusArgs:
    """`arena status`: a sweep's state from disk alone."""
    name: Optional[str] = None  # the sweep; required
    results_dir: str = "results"  # where the sweeps are


# The points a "no difference" verdict must rule out unless min_effect= says otherwise: the
# report's one default, defined here (no numpy) and imported by arena.analysis.verdicts.
MIN_EFFECT = 5.0


@dataclass
class ReportArgs:
    """`arena report`: a sweep's tables and figures."""
    name: Optional[str] = None  # the sweep (results_dir/sweeps/<name>); required
    results_dir: str = "results"  # where the sweeps are
    baseline: Optional[str] = None  # the arm the others are compared with
    allow_mixed: bool = False  # report runs of mixed code/configs
    wandb: bool = False  # also log the tables and figures to W&B
    evals: bool = False  # instead of a sweep: the table of every `arena eval` run under results_dir/evals/ (docs/eval.md)
    min_effect: float = MIN_EFFECT  # points: the difference a "no difference" verdict must rule out (docs/methods.md, Statistics)


@dataclass
class FindingsArgs:
    """`arena findings`: the paper's findings tested on a results dir's sweeps or on run tables."""
    results_dir: str = "results"  # read every sweep under results_dir/sweeps/ (its report runs)
    csv: Optional[str] = None  # instead: committed run tables, one <name>_runs.csv file or a folder of them (docs/findings)
    out: Optional[str] = None  # also write out/findings.md and out/findings.csv
    min_effect: float = MIN_EFFECT  # points: the difference a "no difference" verdict must rule out


@dataclass
class MethodsArgs:
    """`arena methods`: the method presets."""
    method: Optional[str] = None  # one preset (default: all; any case: SAPO_SM = sapo_sm)


@dataclass
class EnvsArgs:
    """`arena envs play|check`: any key not here is one of the environment's env.kwargs."""
    env: str = "sokoban"  # the environment (configs/env/<name>.yaml)
    seed: int = 0  # the episode seed (play); valid: an integer >= 0
    n: int = 100  # episodes (check); valid: an integer >= 1
    make_pool: bool = False  # true: a run without a terminal may make the env's pool on first use (household: minutes)


@dataclass
class DebateArgs:
    """`arena eval`'s debate.* keys."""
    agents: int = 3  # paradigm=*debate: agents per episode, an integer >= 2
    rounds: int = 2  # paradigm=*debate: rounds of answers, an integer >= 1


@dataclass
class RetryArgs:
    """`arena eval`'s retry.* keys: one request's retries (arena.evaluation.client)."""
    max: int = 5  # retries after the first attempt of one request, an integer >= 0
    backoff: float = 0.5  # seconds; exponential backoff with jitter when no Retry-After is given
    max_wait: float = 60.0  # cap on one wait, Retry-After included


EVAL_POLICIES = ("checkpoint", "openai")
EVAL_PARADIGMS = ("sla", "debate", "aggressive_debate")
MAX_TOKENS_FIELDS = ("max_tokens", "max_completion_tokens")
OPENAI_MAX_TOKENS = 1024


@dataclass
class EvalArgs:
    """`arena eval`: its own keys (docs/eval.md, Keys); every other key (n=, seed=, env=,
    model.path, eval.temperature, out, ...) is a run config key. `checked(cfg)` checks the
    choices and ranges against the run config and fills in the defaults that depend on it; the
    eval pipeline (arena/evaluation/) reads the checked EvalArgs."""
    policy: str = "checkpoint"  # what plays: checkpoint (model.path, run here) | openai (an OpenAI-compatible endpoint)
    paradigm: str = "sla"  # sla (one agent) | debate | aggressive_debate (agents that see each other's answers; policy=openai)
    model: Optional[str] = None  # policy=openai: the model name sent to the endpoint
    base_url: str = "https://api.openai.com/v1"  # policy=openai: the endpoint, an http:// or https:// URL
    api_key_env: Optional[str] = "OPENAI_API_KEY"  # the variable holding the key; "" = send no key (a local `arena serve`)
    label: Optional[str] = None  # the row name in the report table; default: the model name / checkpoint folder
    debate: DebateArgs = field(default_factory=DebateArgs)
    concurrency: int = 4  # episodes (so requests) in flight at once, an integer >= 1
    retry: RetryArgs = field(default_factory=RetryArgs)
    timeout: float = 60.0  # seconds per attempt (connect and read)
    max_tokens: Optional[int] = None  # per reply; default: env.max_new_tokens (checkpoint), 1024 (openai)
    max_tokens_field: str = "max_tokens"  # max_completion_tokens for OpenAI reasoning models (o-series, gpt-5)
    sampling_params: bool = True  # send eval.temperature / eval.top_p; false = the endpoint's defaults
    chunk: int = 64  # policy=checkpoint: episodes per batched rollout (each chunk is cached)
    make_pool: bool = False  # true: a run without a terminal may make the env's pool on first use (household: minutes)
    sweep: Optional[str] = None  # NAME: evaluate the final policy of every finished cell of sweep NAME instead (sweep_eval.py)
    min_effect: float = MIN_EFFECT  # with sweep=: points a "no difference" verdict must rule out (docs/methods.md, Statistics)


    def checked(self, cfg) -> "EvalArgs":
        """These keys checked against their choices and ranges (BadArgument names the key and what
        is valid), with base_url's trailing / cut, api_key_env None as "", max_tokens filled in
        (env.max_new_tokens for a checkpoint, OPENAI_MAX_TOKENS for an endpoint), label = model
        for an endpoint (a checkpoint's label is its folder: the eval pipeline's), and one agent
        and one round for paradigm=sla (the debate keys do not apply, nor enter the eval id)."""
        if self.policy not in EVAL_POLICIES:
            raise BadArgument(f"unknown policy {self.policy!r}; valid: {', '.join(EVAL_POLICIES)}")
        if self.paradigm not in EVAL_PARADIGMS:
            raise BadArgument(f"unknown paradigm {self.paradigm!r}; valid: {', '.join(EVAL_PARADIGMS)}")
        self._check_policy(cfg)
        if self.max_tokens_field not in MAX_TOKENS_FIELDS:
            raise BadArgument(f"unknown max_tokens_field {self.max_tokens_field!r}; valid: {', '.join(MAX_TOKENS_FIELDS)}")
        if not isinstance(self.sampling_params, bool):
            raise BadArgument(f"sampling_params={self.sampling_params!r}; valid: true, false")
        sla = self.paradigm == "sla"
        default_tokens = OPENAI_MAX_TOKENS if self.policy == "openai" else cfg.env.max_new_tokens
        tokens = self.max_tokens if self.max_tokens is not None else default_tokens
        return dataclasses.replace(
            self, base_url=str(self.base_url).rstrip("/"), api_key_env=str(self.api_key_env or ""),
            label=self.label or (self.model if self.policy == "openai" else None),
            debate=DebateArgs(agents=1 if sla else _at_least("debate.agents", self.debate.agents, 2),
                              rounds=1 if sla else _at_least("debate.rounds", self.debate.rounds, 1)),
            concurrency=_at_least("concurrency", self.concurrency, 1),
            retry=RetryArgs(max=_at_least("retry.max", self.retry.max, 0),
                            backoff=_at_least("retry.backoff", self.retry.backoff, 0.0, float),
                            max_wait=_at_least("retry.max_wait", self.retry.max_wait, 0.0, float)),
            timeout=_at_least("timeout", self.timeout, 0.001, float), max_tokens=_at_least("max_tokens", tokens, 1),
            chunk=_at_least("chunk", self.chunk, 1))

    def _check_policy(self, cfg) -> None:
        """What each policy needs: an endpoint (openai) or a checkpoint folder (checkpoint, sla only)."""
        if self.policy == "openai":
            if not self.model or not isinstance(self.model, str):
                raise BadArgument("policy=openai needs model=NAME (the model id the endpoint serves)")
            if not str(self.base_url).startswith(("http://", "https://")):
                raise BadArgument(f"base_url={self.base_url!r}: expected an http:// or https:// URL")
            return
        if self.model is not None:
            raise BadArgument("model=NAME is for policy=openai; policy=checkpoint takes model.path=DIR")
        if not cfg.model.path:
            raise BadArgument("policy=checkpoint needs model.path=DIR (an arena or local HF checkpoint)")
        if not Path(cfg.model.path).is_dir():
            raise BadArgument(f"model.path={cfg.model.path!r}: no such checkpoint folder")
        if self.paradigm != "sla":
            raise BadArgument(f"paradigm={self.paradigm} needs a chat endpoint: serve the checkpoint "
                              "(arena serve model.path=...) and use policy=openai; valid for policy=checkpoint: sla")


def _at_least(key: str, value: Any, low: float, kind: type = int) -> Any:
    """`value` as `kind` (int: not a bool) when it is >= low; BadArgument naming the key otherwise."""
    words = "an integer" if kind is int else "a number"
    try:
        number = kind(value)
    except (TypeError, ValueError):
        raise BadArgument(f"{key}={value!r}: expected {words} >= {low}") from None
    if number < low or (kind is int and isinstance(value, bool)):
        raise BadArgument(f"{key}={value!r}: expected {words} >= {low}")
    return number


@dataclass
class ServeModelArgs:
    """`arena serve`'s model.* key."""
    path: Optional[str] = None  # required: a local checkpoint folder (an arena or Hugging Face model, or a run folder)


@dataclass
class ServeArgs:
    """`arena serve` (docs/eval.md, arena serve): its keys only."""
    model: ServeModelArgs = field(default_factory=ServeModelArgs)
    port: int = 8000  # the TCP port, an integer in 0..65535
    host: str = "127.0.0.1"  # the address to bind; there is no authentication, so 0.0.0.0 only on a trusted network
    served_name: Optional[str] = None  # the model id clients send and /v1/models lists; default: the folder's name
    device: str = "cpu"  # cpu | cuda
    max_tokens: Optional[int] = None  # a reply's token limit when the request names none; default 256 (an integer >= 1)
    max_model_len: Optional[int] = None  # prompt + max_tokens must fit it (else 400); default: the model's context
    max_body_bytes: Optional[int] = None  # a larger request body is refused (413); default 1 MiB
    request_timeout: Optional[float] = None  # seconds per request, waiting for the model included (else 504); default 600


def sweep_only_keys() -> tuple[str, ...]:
    """The keys of `arena sweep` that no run config has (dimension, seeds, launcher, fail_fast,
    ...): a one-config command (`arena train seeds=3`) refuses them, naming `arena sweep`."""
    run = {f.name for f in dataclasses.fields(RunConfig)}
    return tuple(k for k in verb_keys(SweepArgs) if k not in run)


def sweep_only_message(key: str, arg: str) -> str:
    return (f"{key}= is an option of `arena sweep` (it expands a grid and launches its cells); this command runs "
            f"one config here and would ignore it. valid: drop {key}=, or run `arena sweep dimension=NAME {arg} "
            f"...`; for one seed of a run use seed=N")

