"""Structured-config schema of every run (decisions.md §F keys); Hydra validates against it.

A key outside this schema is a user error (exit 2, valid keys listed): see `load.py`. The
open namespaces are `po.hp.*` (checked against the chosen members' signatures by
`arena.po.compose.resolve`), `env.kwargs.*` (checked by the environment's constructor) and
`po_defaults` inside the environment's config.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

# Keys with a fixed set of values (checked by load_config; the modules that use them say why).
CHOICES = {
    "backend": ("embedded", "verl"),  # the rows of arena.backends.BACKENDS
    "bc.source": ("expert", "rejection"),
    "model.size": ("tiny", "small", "medium"),
    "model.tokenizer": ("word", "bpe", "wordlevel"),
    "model.prompt_template": ("minimal", "compact", "full"),
    "search.mode": ("first", "best", "tpe"),
    "rollout.name": ("arena", "vllm", "sglang", "trtllm"),
}

@dataclass
class PoConfig:
    method: Optional[str] = "grpo"
    aggregation: Optional[str] = None  # None = the preset's member
    clipping: Optional[str] = None
    seq_mask: Optional[str] = None  # none | neg_adv_kl; threshold: po.hp.seq_mask_delta
    filtering: Optional[str] = None
    advantage: Optional[str] = None
    agg_norm: str = "global"  # global | per_microbatch (decisions §A)
    hp: Dict[str, Any] = field(default_factory=dict)


@dataclass
class EnvConfig:
    name: str = "sokoban"
    kwargs: Dict[str, Any] = field(default_factory=dict)  # passed to arena.envs.make
    penalty_coef: float = 0.1  # format/invalid-action penalty (decisions §D)
    history_length: int = 2
    max_new_tokens: int = 24  # response length limit per turn
    po_defaults: Dict[str, Any] = field(default_factory=dict)  # decisions §F resolution step 2


@dataclass
class ModelConfig:
    path: Optional[str] = None  # a local HF checkpoint; None = BC from a model built below
    size: str = "tiny"  # arena.backends.embedded.model.SIZES; tiny = 0.16M params, CPU-fast
    hidden: Optional[int] = None  # explicit dimensions override the size's
    layers: Optional[int] = None
    heads: Optional[int] = None
    kv_heads: Optional[int] = None
    intermediate: Optional[int] = None
    max_positions: int = 1024
    tokenizer: str = "wordlevel"  # tokenizer kind (arena.backends.embedded.tokenizer): tens of tokens
    # arena.agent.prompts template: "minimal" for a model trained from scratch (only what
    # changes between turns), "full" for a pretrained LLM (the authors' wording)
    prompt_template: str = "minimal"
    vocab_size: int = 1024
    init_seed: int = 0


@dataclass
class EvalConfig:
    n: int = 256  # held-out eval episodes per eval point
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0


@dataclass
class BCConfig:
    demos: int = 1000  # expert episodes
    steps: int = 600  # Sokoban: ~38% greedy success, headroom for RL (docs/testbed.md)
    lr: float = 1e-3
    batch_size: int = 64
    source: str = "expert"  # expert | rejection
    eval_n: int = 256
    # Stop on a validation band instead of a fixed step count (docs/testbed.md, BC band):
    # `steps` is then the cap; greedy success on `val_n` validation rooms (training seeds,
    # disjoint from the eval set) is measured every `val_every` steps from `min_steps` on, and
    # SFT stops once `confirm` checks in a row are >= band[0]. An empty band = exactly `steps` steps.
    band: List[float] = field(default_factory=list)
    val_n: int = 256
    val_every: int = 20
    min_steps: int = 200
    confirm: int = 1


@dataclass
class StabilityConfig:
    theta: float = 0.0025  # decisions §E: variance threshold (sd 5 points)
    min_points: int = 5
    stop_on_collapse: bool = True  # a collapsed run (decisions §E) stops early, marked collapsed
    min_format_valid: float = 0.5  # collapse rule: format-valid ratio below this after 10% of steps


@dataclass
class SearchConfig:
    enabled: bool = False
    mode: str = "first"  # first | best | tpe
    seeds: List[int] = field(default_factory=lambda: [100])
    trials: int = 8


@dataclass
class WandbConfig:
    enabled: bool = True
    project: str = "arena"
    entity: Optional[str] = None
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
    backend: str = "embedded"  # embedded | verl
    device: str = "cpu"
    budget: str = "default"
    seed: int = 0
    steps: int = 100
    lr: float = 1e-4
    kl_coef: float = 0.01
    entropy_coef: float = 0.0  # explicit, never a silent bonus (decisions §C)
    grad_clip: float = 1.0
    group_size: int = 8
    batch_envs: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    ppo_epochs: int = 1
    ppo_mini_batch_size: Optional[int] = None  # in turn-samples; overrides ppo_num_mini_batches
    ppo_num_mini_batches: int = 2
    micro_batch_size: int = 256  # turn-samples per forward/backward (gradient accumulation)
    save_freq: int = 10
    test_freq: int = 10
    out: Optional[str] = None
    results_dir: str = "results"
    name: Optional[str] = None
    arm: Optional[str] = None  # set by the sweep; excluded from the cell id
    # sweep-only keys
    dimension: Optional[str] = None
    seeds: Any = 3
    launcher: str = "local"
    fail_fast: bool = False
