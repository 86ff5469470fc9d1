"""Structured-config schema of every run (docs/design.md, Config paths and resolution order);
Hydra validates against it. The comment on (or above) each field is its `arena <verb> --help` text.

A key outside this schema is a user error (exit 2, valid keys listed): see `load.py`. The
open namespaces are `verl.*` (checked against verl's own config by the verl backend),
`po.hp.*` (checked against the chosen members' signatures by
`arena.po.compose.resolve`), `env.kwargs.*` (checked by the environment's constructor) and
`po_defaults` inside the environment's config.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

# Keys with a fixed set of values (checked by load_config; the modules that use them say why).
CHOICES = {
    "backend": ("embedded", "verl"),  # the rows of arena.backends.BACKENDS
    "device": ("cpu", "cuda"),  # torch's device types arena runs on
    "bc.source": ("expert", "rejection"),
    "model.size": ("tiny", "small", "medium"),
    "model.tokenizer": ("word", "bpe", "wordlevel"),
    "model.prompt_template": ("minimal", "compact", "full"),
    "search.mode": ("first", "best", "tpe"),
    "rollout.name": ("arena", "vllm", "sglang", "trtllm"),
}

@dataclass
class PoConfig:
    method: Optional[str] = "grpo"  # the preset (`arena methods` lists them with their members)
    aggregation: Optional[str] = None  # None = the preset's member
    clipping: Optional[str] = None  # importance-sampling clipping member; None = the preset's
    seq_mask: Optional[str] = None  # none | neg_adv_kl; threshold: po.hp.seq_mask_delta
    filtering: Optional[str] = None  # trajectory filtering member; None = the preset's
    advantage: Optional[str] = None  # advantage member; None = the preset's
    agg_norm: str = "global"  # global | per_microbatch (docs/design.md, The dimensions and their members)
    hp: Dict[str, Any] = field(default_factory=dict)  # members' hyperparameters, po.hp.<name>=value


@dataclass
class EnvConfig:
    name: str = "sokoban"  # the environment (configs/env/<name>.yaml; `arena envs`)
    kwargs: Dict[str, Any] = field(default_factory=dict)  # passed to arena.envs.make
    penalty_coef: float = 0.1  # format/invalid-action penalty (docs/design.md, Testbed recipe)
    history_length: int = 2  # past turns shown in the prompt
    max_new_tokens: int = 24  # response length limit per turn
    po_defaults: Dict[str, Any] = field(default_factory=dict)  # the environment's po.* defaults (docs/design.md, Config paths and resolution order)


@dataclass
class ModelConfig:
    path: Optional[str] = None  # a local HF checkpoint; None = BC from a model built below
    size: str = "tiny"  # arena.lm.model.SIZES; tiny = 0.16M params, CPU-fast
    hidden: Optional[int] = None  # explicit dimensions override the size's
    layers: Optional[int] = None  # transformer layers
    heads: Optional[int] = None  # attention heads
    kv_heads: Optional[int] = None  # key/value heads (grouped-query attention)
    intermediate: Optional[int] = None  # MLP width
    max_positions: int = 1024  # longest context in tokens
    tokenizer: str = "wordlevel"  # tokenizer kind (arena.lm.tokenizer): tens of tokens
    # arena.agent.prompts template: "minimal" for a model trained from scratch (only what
    # changes between turns), "full" for a pretrained LLM (the authors' wording)
    prompt_template: str = "minimal"
    vocab_size: int = 1024  # largest vocabulary the tokenizer may build
    init_seed: int = 0  # seed of the model's initial weights


@dataclass
class EvalConfig:
    n: int = 256  # held-out eval episodes per eval point
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0  # nucleus sampling of the eval
    # evaluate every step of the final 20% (the stability window, docs/design.md §E); false: only
    # step 0, every test_freq steps and the last step (embedded backend; the learning tests)
    final_window: bool = True


@dataclass
class BCConfig:
    demos: int = 1000  # expert episodes
    steps: int = 600  # SFT steps; with a band, the most the band stop may take (each budget sets its own: --help shows it)
    lr: float = 1e-3  # BC learning rate
    batch_size: int = 64  # BC sequences per step
    source: str = "expert"  # expert | rejection
    eval_n: int = 256  # eval episodes of the BC checkpoint
    # Stop on a validation band instead of a fixed step count (docs/testbed.md, BC band):
    # `steps` is then the cap; greedy success on `val_n` validation rooms (training seeds,
    # disjoint from the eval set) is measured every `val_every` steps from `min_steps` on, and
    # SFT stops once `confirm` checks in a row are >= band[0]. An empty band = exactly `steps` steps.
    band: List[float] = field(default_factory=list)
    val_n: int = 256  # validation rooms of the band stop
    val_every: int = 20  # steps between validation checks
    min_steps: int = 200  # no band stop before this step
    confirm: int = 1  # checks in a row inside the band to stop
    # Pad each SFT mini-batch to its own longest prompt and reply (true) instead of the whole demo
    # set's (false): the same loss up to float rounding, ~30% less SFT time on household's long
    # prompts. Off by default so that every recorded run reproduces bit for bit (docs/testbed.md).
    pad_per_batch: bool = False
    # Length-grouped SFT mini-batches (true) instead of uniform draws: transformers'
    # LengthGroupedSampler orders each epoch's demos so that a mini-batch holds demos of about one
    # length, each padded to its own longest (arena/bc/train.py, length_grouped_batches). Fewer
    # padded tokens (shop: 184 a mini-batch against 306, and 280 with pad_per_batch alone), but the
    # mini-batches are no longer uniform draws. On shop it breaks BC: a length is about one kind of
    # turn, so many mini-batches teach one turn and the SFT transition never comes (validation 0% at
    # every check to step 2000, seeds 2 and 3; docs/testbed.md, Benchmarks). Off in every budget.
    group_by_length: bool = False


@dataclass
class StabilityConfig:
    theta: float = 0.0025  # variance threshold, sd 5 points (docs/design.md, Stability criterion)
    min_points: int = 5  # eval points before the variance is judged
    stop_on_collapse: bool = True  # a collapsed run stops early, marked collapsed (docs/design.md, Stability criterion)
    min_format_valid: float = 0.5  # collapse rule: format-valid ratio below this after 10% of steps


@dataclass
class SearchConfig:
    enabled: bool = False  # run the stability search before the report cells
    mode: str = "first"  # first | best | tpe
    seeds: List[int] = field(default_factory=lambda: [100])  # the search cells' seeds
    trials: int = 8  # search points tried at most


@dataclass
class WandbConfig:
    enabled: bool = True  # log to Weights & Biases (offline unless WANDB_MODE says otherwise)
    project: str = "arena"  # W&B project
    entity: Optional[str] = None  # W&B entity (team or user)
    mode: Optional[str] = None  # None = WANDB_MODE or offline


@dataclass
class RolloutConfig:
    # backend=verl's rollout engine (verl's `actor_rollout_ref.rollout.name`): "arena" (arena's
    # KV-cache sampler, CPU or CUDA, no extra package) or verl's vllm | sglang | trtllm (GPU).
    name: str = "arena"


@dataclass
class RunConfig:
    env: EnvConfig = field(default_factory=EnvConfig)
    po: PoConfig = field(default_factory=PoConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    bc: BCConfig = field(default_factory=BCConfig)
    stability: StabilityConfig = field(default_factory=StabilityConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    wandb: WandbConfig = field(default_factory=WandbConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    # backend=verl: verl.<dotted.path>=value sets that key of verl's trainer config (checked against
    # verl's config when the run's verl config is built; docs/verl.md, Every verl knob)
    verl: Dict[str, Any] = field(default_factory=dict)
    backend: str = "embedded"  # embedded | verl
    device: str = "cpu"  # cpu | cuda
    budget: str = "default"  # configs/budget/<name>.yaml: steps, batch and eval sizes together
    seed: int = 0  # the run's seed (episodes, sampling, initial model)
    steps: int = 100  # RL updates
    lr: float = 1e-4  # RL learning rate
    kl_coef: float = 0.01  # KL penalty to the reference (BC) policy
    entropy_coef: float = 0.0  # explicit, never a silent bonus (docs/design.md, What we do not copy)
    grad_clip: float = 1.0  # gradient norm clip
    group_size: int = 8  # episodes per group (same start state)
    batch_envs: int = 16  # groups per update
    temperature: float = 1.0  # rollout sampling temperature
    top_p: float = 1.0  # rollout nucleus sampling
    ppo_epochs: int = 1  # passes over each batch
    ppo_mini_batch_size: Optional[int] = None  # in turn-samples; overrides ppo_num_mini_batches
    ppo_num_mini_batches: int = 2  # optimizer steps per pass
    micro_batch_size: int = 256  # turn-samples per forward/backward (gradient accumulation)
    # Sort each mini-batch's rows by length into micro-batches, each padded to its own longest
    # row (embedded backend): the same gradient up to float rounding (not bit for bit), less
    # work on long, varied prompts (docs/design.md, Micro-batches by length). auto | true | false;
    # auto = on exactly when po.agg_norm=global (true with another agg_norm is an error).
    # Sorted micro-batches hold at most min(micro_batch_size, 64) rows.
    sort_micro_batches: Any = "auto"
    save_freq: int = 10  # steps between checkpoints
    test_freq: int = 10  # steps between eval points
    out: Optional[str] = None  # the run folder; default <results_dir>/runs/<cell_id>
    results_dir: str = "results"  # where runs, sweeps and reports go
    name: Optional[str] = None  # the sweep's name (a folder under results_dir/sweeps)
    arm: Optional[str] = None  # set by the sweep; excluded from the cell id
    # How a sweep expands and launches (dimension, seeds, launcher, fail_fast, ...) is no run's
    # config: those keys are the sweep's own (arena.config.verb_args.SweepArgs).
