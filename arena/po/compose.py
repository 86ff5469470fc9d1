"""The composer: resolve `po.*` into one member per dimension, then build the objective.

Resolution order (docs/design.md, Config paths and resolution order), last wins:
  1. the preset (`po.method`, METHODS);
  2. the environment's `po_defaults`, scoped by member
     (`po_defaults.clipping.gspo.eps_low`, `po_defaults.filtering.dynamic.filter_key`);
     an entry under `po_defaults.methods.<method>` beats a member entry;
  3. explicit `po.*` overrides (`aggregation`, `clipping`, `seq_mask`, `filtering`,
     `advantage`, `agg_norm`, and `hp.<name>`).
Replacing a dimension's member drops the old member's hyperparameters; only the keys that
remain are checked against the chosen functions' signatures (`Registry.hyperparameters`).
Unknown names raise ValueError listing the valid ones.

The objective, per micro-batch (docs/methods.md §6):
  mask_pg = SEQ_MASK[seq_mask](logp, old, A, mask; hp)          (`none`: mask itself)
  PG      = AGG[aggregation](CLIP[clipping](logp, old, A, mask_pg; hp), mask_pg; norm)
  KL      = AGG[aggregation](k3(logp, ref), mask; norm)        (original mask, m§5.0)
  H       = AGG[aggregation](entropy, mask; norm)
  total   = s * (PG + kl_coef * KL - entropy_coef * H)
where s = 1 under `agg_norm=global` (norm = the mini-batch's counts, taken before the sequence
mask, so micro-batch values add up to the mini-batch value) and s = 1/micro_batches under
`agg_norm=per_microbatch` (the authors' mean of micro-batch means; norm is ignored).

What a backend needs, exported here so that no backend names a member (docs/design.md, Floors):
  per row      `compute_advantages(po, batch)`; `po.advantage_reads()` (the fields it reads)
  per batch    `policy_loss` / `objective`; `po.global_norm`, `po.micro_batch_scale(k)`
  per step     `collect_step_groups(po, rollout, ...)` (filtering with resampling tries);
               `advantage_diagnostics(po, batch)`
  transport    `po.to_dict()` / `ResolvedPO.from_dict(d)`: the whole resolved PO as plain data
               (the verl backend carries it in its loss config section).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, NamedTuple, Optional

import torch

from .advantages import ADV
from .advantages_gigpo import anchor_repeat_stats, step_term_stats
from .aggregation import AGG, AggNorm
from .clipping import CLIP, SEQ_MASK, share_tokens
from .filtering import FILTER, collect_groups
from .kl import kl_k3
from .members import Registry
from .methods import METHODS

# Every member slot of a run, in the order of `po.*` keys. The sequence mask is a member
# registry like the four dimensions of the paper (it belongs to the clipping dimension there).
DIMENSIONS: dict[str, Registry] = {
    "aggregation": AGG, "clipping": CLIP, "seq_mask": SEQ_MASK, "filtering": FILTER, "advantage": ADV,
}
AGG_NORMS = ("global", "per_microbatch")
PO_KEYS = ("method", *DIMENSIONS, "agg_norm", "hp")
# The fields of a ResolvedPO as plain data (`to_dict` / `from_dict`), in declaration order.
PO_FIELDS = ("method", "group", *DIMENSIONS, "agg_norm", "hp")


@dataclass(frozen=True)
class ResolvedPO:
    method: Optional[str]
    group: Optional[str]
    aggregation: str
    clipping: str
    seq_mask: str
    filtering: str
    advantage: str
    agg_norm: str
    hp: Mapping[str, Any] = field(default_factory=dict)  # only the keys explicitly set

    def member_hp(self, dimension: str) -> dict[str, Any]:
        """kwargs for the chosen member of `dimension` (explicit values only)."""
        accepted = DIMENSIONS[dimension].hyperparameters(getattr(self, dimension))
        return {k: v for k, v in self.hp.items() if k in accepted}

    def effective_hp(self) -> dict[str, Any]:
        """Every hyperparameter of the chosen members, with defaults filled in (for logging)."""
        out: dict[str, Any] = {}
        for dim, registry in DIMENSIONS.items():
            out.update(registry.hyperparameters(getattr(self, dim)))
        out.update(self.hp)
        return dict(sorted(out.items()))

    @property
    def seq_mask_delta(self) -> Optional[float]:
        """The sequence mask's threshold, or None when the mask is off (tables, W&B grouping)."""
        if self.seq_mask == "none":
            return None
        return self.effective_hp().get("seq_mask_delta")

    def flat(self) -> dict[str, Any]:
        """Flat `po.*` keys (W&B config, run-folder config); `po.seq_mask_delta` is the derived
        threshold (null = mask off), kept as one column for grouping."""
        out = {f"po.{k}": getattr(self, k) for k in PO_KEYS if k != "hp"}
        out["po.seq_mask_delta"] = self.seq_mask_delta
        out.update({f"po.hp.{k}": v for k, v in self.effective_hp().items()})
        return out

    @property
    def global_norm(self) -> bool:
        """True when every aggregation divides by the mini-batch's counts (`agg_norm=global`):
        micro-batch losses then add up to the mini-batch loss, whatever rows share a micro-batch."""
        return self.agg_norm == "global"

    def micro_batch_scale(self, micro_batches: int) -> float:
        """s of the objective (module docstring): 1 under agg_norm=global, 1/micro_batches under
        per_microbatch (the mean of the micro-batch means)."""
        return 1.0 if self.global_norm else 1.0 / micro_batches

    def advantage_reads(self) -> tuple[str, ...]:
        """The per-turn fields the chosen advantage reads (its `@reads`), e.g. `entropy` for EMPG."""
        return ADV.reads(self.advantage)

    def to_dict(self) -> dict[str, Any]:
        """The whole resolved PO as plain data (PO_FIELDS; `hp` a plain dict): `from_dict`
        gives back an equal ResolvedPO."""
        out = {k: getattr(self, k) for k in PO_FIELDS}
        out["hp"] = dict(self.hp)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ResolvedPO":
        """The ResolvedPO of `to_dict()`'s output (any Mapping, e.g. an OmegaConf node). Every key of
        PO_FIELDS is required and no other is taken; members, agg_norm and hp are checked as in
        `resolve`. ValueError naming what is wrong and what is valid."""
        missing, unknown = sorted(set(PO_FIELDS) - set(data)), sorted(set(data) - set(PO_FIELDS))
        if missing or unknown:
            raise ValueError(f"a resolved PO needs exactly the keys {', '.join(PO_FIELDS)}; "
                             f"missing {missing}, unknown {unknown}")
        members = {dim: str(data[dim]) for dim in DIMENSIONS}
        for dim, name in members.items():
            DIMENSIONS[dim].member(name)  # raises, listing the valid names
        if data["agg_norm"] not in AGG_NORMS:
            raise ValueError(f"unknown agg_norm {data['agg_norm']!r}; valid: {', '.join(AGG_NORMS)}")
        hp = {str(k): v for k, v in dict(data["hp"] or {}).items()}
        check_hp(members, hp)
        return cls(method=data["method"], group=data["group"], agg_norm=str(data["agg_norm"]),
                   hp=dict(sorted(hp.items())), **members)


def check_hp(members: Mapping[str, str], hp: Mapping[str, Any]) -> None:
    """ValueError naming the keys of `hp` that none of `members` ({dimension: name}) takes, or
    a value whose type the member's signature does not take."""
    accepted = {k for dim, name in members.items() for k in DIMENSIONS[dim].hyperparameters(name)}
    bad = sorted(set(hp) - accepted)
    if bad:
        chosen = ", ".join(f"{dim}={name}" for dim, name in members.items())
        raise ValueError(f"unknown hyperparameter(s) {bad} for {chosen}; valid: {', '.join(sorted(accepted)) or '(none)'}")
    for dim, name in members.items():  # po.hp.eps_high=abc: refused here, not in every cell after BC
        for key in sorted(set(hp) & set(DIMENSIONS[dim].hyperparameters(name))):
            problem = DIMENSIONS[dim].hp_type_problem(name, key, hp[key])
            if problem:
                raise ValueError(problem)


def resolve(po: Optional[Mapping[str, Any]] = None, po_defaults: Optional[Mapping[str, Any]] = None) -> ResolvedPO:
    """Resolve `po.*` (a preset plus overrides) against an environment's `po_defaults`."""
    po = dict(po or {})
    po_defaults = dict(po_defaults or {})
    unknown = sorted(set(po) - set(PO_KEYS))
    if unknown:
        raise ValueError(f"unknown po key(s) {unknown}; valid: {', '.join(PO_KEYS)}")
    method = po.get("method")
    if method is not None and method not in METHODS:
        raise ValueError(f"unknown method {method!r}; valid: {', '.join(METHODS)}")
    preset = METHODS[method] if method is not None else METHODS["grpo"]
    members = {dim: po.get(dim, getattr(preset, dim)) for dim in DIMENSIONS}
    for dim, name in members.items():
        DIMENSIONS[dim].member(name)  # raises, listing the valid names
    agg_norm = po.get("agg_norm", "global")
    if agg_norm not in AGG_NORMS:
        raise ValueError(f"unknown agg_norm {agg_norm!r}; valid: {', '.join(AGG_NORMS)}")

    def accepts(dim: str) -> dict[str, Any]:
        return DIMENSIONS[dim].hyperparameters(members[dim])

    # 1. preset hp, only for the dimensions whose member the preset still owns
    kept_dims = [dim for dim in DIMENSIONS if members[dim] == getattr(preset, dim)]
    hp = {k: v for k, v in preset.hp.items() if any(k in accepts(d) for d in kept_dims)}
    # 2. environment defaults: member-scoped, then method-scoped
    unknown = sorted(set(po_defaults) - set(DIMENSIONS) - {"methods"})
    if unknown:
        raise ValueError(f"unknown po_defaults section(s) {unknown}; valid: {', '.join([*DIMENSIONS, 'methods'])}")
    for dim in DIMENSIONS:
        hp.update(dict((po_defaults.get(dim) or {}).get(members[dim]) or {}))
    if method is not None:
        hp.update(dict((po_defaults.get("methods") or {}).get(method) or {}))
    # 3. explicit overrides
    hp.update(dict(po.get("hp") or {}))

    check_hp(members, hp)
    return ResolvedPO(
        method=method,
        group=preset.group if method is not None else None,
        agg_norm=agg_norm,
        hp=dict(sorted(hp.items())),
        **members,
    )


class Objective(NamedTuple):
    total: torch.Tensor  # scalar, what backward() is called on
    pg: torch.Tensor  # scalar policy-gradient term (what verl's policy loss returns)
    kl: torch.Tensor  # scalar aggregated k3 to the reference (0 when no ref)
    entropy: torch.Tensor  # scalar aggregated entropy (0 when not given)
    metrics: dict  # actor/* metrics of this micro-batch (python floats)
    # per mean or share in `metrics`: the number of tokens it is over (python floats); counts such
    # as actor/masked_seqs have none. Pooling micro-batches as sum_u v_u n_u / sum_u n_u gives the
    # value over their union, whichever rows share a micro-batch (embedded update)
    tokens: dict


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> float:
    denom = float(mask.sum())
    return float((x * mask).sum()) / denom if denom > 0 else 0.0


def policy_loss(
    po: ResolvedPO,
    logp: torch.Tensor,  # [B, T] current policy
    old_logp: torch.Tensor,  # [B, T] behaviour (old) policy
    adv: torch.Tensor,  # [B, T] advantage broadcast over tokens
    mask: torch.Tensor,  # [B, T] response mask
    *,
    norm: Optional[AggNorm] = None,
) -> tuple[torch.Tensor, dict]:
    """The policy-gradient term alone (verl adds KL and entropy itself), plus its metrics."""
    pg, metrics, _ = _policy_loss_and_tokens(po, logp, old_logp, adv, mask, norm=norm)
    return pg, metrics


def _policy_loss_and_tokens(po, logp, old_logp, adv, mask, *, norm) -> tuple[torch.Tensor, dict, dict]:
    """policy_loss, plus the token count of each metric that is a mean or a share (Objective.tokens)."""
    mask_pg = SEQ_MASK[po.seq_mask](logp, old_logp, adv, mask, **po.member_hp("seq_mask"))  # [B, T]
    loss_tok, clip_metrics = CLIP[po.clipping](logp, old_logp, adv, mask_pg, **po.member_hp("clipping"))  # [B, T]
    agg_norm = norm if po.global_norm else None
    if po.global_norm and agg_norm is None:
        agg_norm = AggNorm.of(mask)  # the micro-batch is the whole mini-batch
    pg = AGG[po.aggregation](loss_tok, mask_pg, norm=agg_norm)  # scalar
    with torch.no_grad():
        rows_before = mask.sum(-1) > 0  # [B]
        rows_after = mask_pg.sum(-1) > 0  # [B]
        metrics = {f"actor/{k}": float(v) for k, v in clip_metrics.items()}
        metrics["actor/off_policy_kl"] = _masked_mean(old_logp - logp, mask)
        metrics["actor/masked_seqs"] = float((rows_before & ~rows_after).sum())
        # the clip fractions are shares of tokens of mask_pg (the mask the clip member saw)
        tokens = {f"actor/{k}": float(m.count_nonzero()) for k, m in share_tokens(adv, mask_pg).items()}
        tokens["actor/off_policy_kl"] = float(mask.sum())
    return pg, metrics, tokens


def objective(
    po: ResolvedPO,
    logp: torch.Tensor,  # [B, T]
    old_logp: torch.Tensor,  # [B, T]
    adv: torch.Tensor,  # [B, T]
    mask: torch.Tensor,  # [B, T]
    *,
    ref_logp: Optional[torch.Tensor] = None,  # [B, T]
    entropy: Optional[torch.Tensor] = None,  # [B, T] current-policy token entropy
    kl_coef: float = 0.0,
    entropy_coef: float = 0.0,
    norm: Optional[AggNorm] = None,
    micro_batches: int = 1,
) -> Objective:
    """PG + kl_coef*KL - entropy_coef*H for one micro-batch (module docstring)."""
    _check_same_shape(logp=logp, old_logp=old_logp, adv=adv, mask=mask, ref_logp=ref_logp, entropy=entropy)
    pg, metrics, tokens = _policy_loss_and_tokens(po, logp, old_logp, adv, mask, norm=norm)
    agg_norm = (norm or AggNorm.of(mask)) if po.global_norm else None
    aggregate = AGG[po.aggregation]
    zero = logp.new_zeros(())
    kl = aggregate(kl_k3(logp, ref_logp), mask, norm=agg_norm) if ref_logp is not None else zero  # scalar
    ent = aggregate(entropy, mask, norm=agg_norm) if entropy is not None else zero  # scalar
    scale = po.micro_batch_scale(micro_batches)
    total = scale * (pg + kl_coef * kl - entropy_coef * ent)  # scalar
    with torch.no_grad():
        if ref_logp is not None:
            metrics["actor/kl_ref"] = _masked_mean(kl_k3(logp, ref_logp), mask)
            tokens["actor/kl_ref"] = float(mask.sum())
        if entropy is not None:
            metrics["actor/entropy"] = _masked_mean(entropy, mask)
            tokens["actor/entropy"] = float(mask.sum())
    return Objective(total, pg, kl, ent, metrics, tokens)


def _check_same_shape(**tensors: Optional[torch.Tensor]) -> None:
    shapes = {k: tuple(v.shape) for k, v in tensors.items() if v is not None}
    if len(set(shapes.values())) > 1:
        raise ValueError(f"all loss inputs must have the same [B, T] shape; got {shapes}")
    if any(len(s) != 2 for s in shapes.values()):
        raise ValueError(f"loss inputs must be 2-D [B, T]; got {shapes}")


def collect_step_groups(po: ResolvedPO, rollout: Callable[[int], Any], *, needed_groups: int,
                        step: int) -> tuple[Any, dict]:
    """A step's kept groups: `filtering.collect_groups` with the chosen filtering member and its
    explicit hyperparameters (resampling tries, cold start and stats as documented there)."""
    return collect_groups(rollout, po.filtering, needed_groups=needed_groups, step=step, **po.member_hp("filtering"))


def compute_advantages(po: ResolvedPO, batch) -> torch.Tensor:
    """One advantage per turn-sample [N] from the chosen advantage member."""
    return ADV[po.advantage](batch, **po.member_hp("advantage"))


def advantage_diagnostics(po: ResolvedPO, batch) -> dict[str, float]:
    """The adv/* metrics of a step, for every method: how often GiGPO's anchor states repeat
    (`anchor_repeat_stats`) and what its step term would add (`step_term_stats`), with the run's
    own GiGPO gamma/mode/group_stats when its advantage member is GiGPO, else GiGPO's defaults.
    Backends call this and never name an advantage member."""
    gigpo_hp = {k: v for k, v in po.member_hp("advantage").items() if k != "step_w"} if po.advantage == "gigpo" else {}
    anchors, step_term = anchor_repeat_stats(batch), step_term_stats(batch, **gigpo_hp)
    return {
        "adv/anchor_repeat_frac": anchors["repeat_frac"],
        "adv/anchor_multi_traj_frac": anchors["multi_traj_frac"],
        "adv/step_term_nonzero_frac": step_term["nonzero_frac"],
        "adv/step_term_abs_ratio": step_term["abs_ratio"],
        "adv/step_term_corr": step_term["corr"],
    }
