"""Method presets: one data line each (docs/methods.md, Presets), citing the paper and docs/methods.md.

A preset only names a member in each dimension (and the sequence mask) plus hyperparameter
values. It never changes a dimension it does not name: GSPO does not force an aggregation,
SAMPO's filtering is just `filtering="dynamic"`, and so on (docs/design.md, What we do not
copy). `group` is the row group of the paper's tables. Hyperparameters are flat
(`po.hp.<name>`); the composer routes each to the member function whose signature accepts it.

Paper sections: §4.1 IS clipping, §4.2 advantage design, §4.3 dynamic filtering,
§4.4 loss aggregation, §5 SAMPO; docs/methods.md § numbers are given as "m§".
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

GROUPS = ("baseline", "aggregation", "clipping", "filtering", "advantage", "combined")


@dataclass(frozen=True)
class Preset:
    group: str  # row group in the paper's tables (GROUPS)
    cite: str  # where the paper and the authors' code define it
    aggregation: str = "token_mean"
    clipping: str = "ppo"
    seq_mask: str = "none"  # arena.po.clipping.SEQ_MASK: none | neg_adv_kl
    filtering: str = "none"
    advantage: str = "grpo"
    hp: Mapping[str, object] = field(default_factory=dict)

    def __post_init__(self):
        if self.group not in GROUPS:
            raise ValueError(f"unknown preset group {self.group!r}; valid: {', '.join(GROUPS)}")
        object.__setattr__(self, "hp", MappingProxyType(dict(self.hp)))


# the PPO dual clip's bounds (docs/methods.md §5.1), shared by every preset on `clipping="ppo"`;
# GiGPO's own hyperparameters (docs/methods.md §4.2), shared by the presets on `advantage="gigpo"`
PPO_CLIP = MappingProxyType(dict(eps_low=0.2, eps_high=0.2, clip_c=3.0))
GIGPO_HP = MappingProxyType(dict(gamma=0.95, step_w=1.0, mode="mean_std_norm"))

# fmt: off
# the table itself; METHODS is its read-only view (tests add a throwaway preset with monkeypatch)
PRESET_TABLE: dict[str, Preset] = {
    "grpo":     Preset("baseline",    "paper §2.2 (token-mean, PPO dual-clip); m§4.1, m§5.1", hp=PPO_CLIP),
    "grpo_st":  Preset("aggregation", "paper §4.4 (seq-mean-token-mean); m§6",               aggregation="seq_mean_token_mean", hp=PPO_CLIP),
    "gspo":     Preset("clipping",    "paper §4.1 (sequence-level clip); m§5.2",              clipping="gspo"),
    "cispo":    Preset("clipping",    "paper §4.1 (tolerant clip, no lower bound); m§5.3",    clipping="cispo", hp=dict(eps_low=1.0, eps_high=0.2)),
    "sapo":     Preset("clipping",    "paper §4.1 (soft gate, 'temp_2'); m§5.4",              clipping="sapo", hp=dict(tau_pos=2.0, tau_neg=2.1)),
    "cispo_sm": Preset("clipping",    "paper §4.1 finding 2 (sequence mask); m§5.5",          clipping="cispo", seq_mask="neg_adv_kl", hp=dict(eps_low=1.0, eps_high=0.2, seq_mask_delta=3e-3)),
    "sapo_sm":  Preset("clipping",    "paper §4.1 finding 2 (sequence mask); m§5.4-5.5",      clipping="sapo", seq_mask="neg_adv_kl", hp=dict(tau_pos=1.0, tau_neg=1.05, seq_mask_delta=3e-3)),
    "gigpo":    Preset("advantage",   "paper §4.2 (anchor-state step advantage); m§4.2",      advantage="gigpo", hp=dict(**PPO_CLIP, **GIGPO_HP)),
    "empg":     Preset("advantage",   "paper §4.2 (entropy-modulated advantage); m§4.3",      advantage="empg", hp=dict(**PPO_CLIP, k=1.0, k_f=1.0, zeta=0.05)),
    "grpo_ds":  Preset("filtering",   "paper §4.3 (DAPO dynamic sampling); m§7",              filtering="dynamic", hp=dict(**PPO_CLIP, max_gen_batches=3)),
    "gigpo_ds": Preset("filtering",   "paper §4.3 finding 4 (dynamic sampling + GiGPO); m§7", filtering="dynamic", advantage="gigpo", hp=dict(**PPO_CLIP, **GIGPO_HP, max_gen_batches=3)),
    "sampo":    Preset("combined",    "paper §5.2 eq. SAMPO; m§8",              clipping="gspo", filtering="dynamic", advantage="gigpo", hp=dict(**GIGPO_HP, max_gen_batches=2)),
}
# fmt: on
METHODS: Mapping[str, Preset] = MappingProxyType(PRESET_TABLE)
