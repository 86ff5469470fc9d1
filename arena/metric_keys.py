"""The metrics glossary: every key a run writes to metrics.jsonl (and W&B), with one line of
meaning. The single source: docs/design.md's "Metrics glossary" table is generated from it
(`glossary_table()`), and tests check that both backends log no key outside it.

Means are masked means over valid response tokens (or rows) unless a line says otherwise;
"turn-sample" = one row of the per-turn batch (one LLM call). docs/design.md, Metrics
glossary, says which backend writes which key.
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Mapping

# fmt: off
METRICS: Mapping[str, str] = MappingProxyType({
    "step": "RL step of the row (0 = before any update: the starting policy's eval)",
    # rollout and filtering
    "train/success_rate": "share of won trajectories over ALL sampled trajectories of the step (before filtering)",
    "rollout/format_valid_ratio": "share of kept turn-samples that are format-valid (one <think>..</think><action>..</action>)",
    "rollout/action_valid_ratio": "share of kept turn-samples whose action is format-valid and admissible",
    "rollout/response_length": "mean response tokens per kept turn-sample",
    "rollout/response_length_std": "standard deviation of response tokens over the kept turn-samples (what token-mean and sequence-mean aggregation weigh differently)",
    "rollout/turn_samples": "turn-samples (rows) in the step's training batch after filtering",
    "rollout/pad_rows": "verl: zero-mask copies of rows that fill each mini-batch to whole micro-batches x ranks (no loss term; counted in no denominator)",
    "filter/kept_group_frac": "kept groups / sampled groups of the step (1.0 without filtering)",
    "filter/tries": "rollout tries made by dynamic filtering this step (1 without filtering)",
    # advantage diagnostics
    "adv/anchor_repeat_frac": "share of turn-samples whose GiGPO anchor state (group, raw observation) is shared with another row (A^S can be non-zero)",
    "adv/anchor_multi_traj_frac": "share of turn-samples whose GiGPO anchor state occurs in two or more trajectories",
    "adv/step_term_nonzero_frac": "share of turn-samples whose GiGPO step advantage A^S is non-zero (GiGPO's gamma/mode, or its defaults)",
    "adv/step_term_abs_ratio": "mean abs(A^S) / mean abs(A^E): GiGPO's step term against its episode term",
    "adv/step_term_corr": "Pearson correlation of A^S and A^E over the step's turn-samples (near 1: the step term adds little direction)",
    # policy update
    "actor/pg_loss": "policy-gradient term of the loss, summed over the micro-batches of a mini-batch, mean over updates",
    "actor/off_policy_kl": "masked mean of old_logp - logp (k1 estimate of KL(pi_old ‖ pi_theta))",
    "actor/ppo_kl": "verl's name for actor/off_policy_kl (kept so verl's dashboards work)",
    "actor/kl_ref": "masked mean of the k3 estimate of KL(pi_theta ‖ pi_ref) to the BC reference",
    "actor/kl_loss": "verl's KL-to-reference loss term (its agg_loss of k3); mapped to actor/kl_ref",
    "actor/entropy": "masked mean token entropy of the current policy",
    "actor/grad_norm": "gradient norm before clipping, mean over the step's optimizer updates",
    "actor/clipfrac_high": "share of valid tokens with ratio > 1 + eps_high (sequence ratio for gspo)",
    "actor/clipfrac_low": "share of valid tokens with ratio < 1 - eps_low (sequence ratio for gspo)",
    "actor/clipfrac_pos_adv": "share of valid tokens with A > 0 whose ratio is > 1 + eps_high",
    "actor/clipfrac_neg_adv": "share of valid tokens with A < 0 whose ratio is < 1 - eps_low",
    "actor/masked_seqs": "rows the sequence mask removed (valid tokens before, none after): sum over micro-batches, mean over updates",
    "actor/low_ratio_neg_seqs": "embedded: rows the neg_adv_kl mask at delta 3e-3 would remove, whether or not a mask is on (same sum/mean)",
    "actor/updates_per_step": "optimizer updates per RL step (ppo_epochs x mini-batches)",
    "actor/skipped_updates": "optimizer updates skipped because the loss or gradient was not finite",
    # evaluation
    "eval/success_rate": "greedy (eval.temperature) success over eval.n held-out episodes",
    "eval/format_valid_ratio": "share of format-valid turn-samples in the eval episodes",
    # timing
    "perf/step_seconds": "wall seconds of the whole step (rollout, update, eval)",
    "perf/rollout_seconds": "wall seconds of the step's rollouts (all filtering tries)",
    "perf/env_seconds": "wall seconds spent inside environment step/reset calls",
    "perf/logprob_seconds": "wall seconds of the old/ref log-probs (and entropies where the advantage reads them) and the advantages",
    "perf/update_seconds": "wall seconds of the policy update",
    # verl's own names, kept beside the mapped ones in a verl run's rows
    "response_length/mean": "verl: mean response length (mapped to rollout/response_length)",
    "timing_s/step": "verl: wall seconds of the step (mapped to perf/step_seconds)",
})
# The kind of each key the embedded update computes per micro-batch, which says how a mini-batch
# merges its micro-batches' values (arena/backends/embedded/update.py, `merge_micro_batches`):
#   mean, share:  v_b = sum_u v_u n_u / sum_u n_u  (n_u: the tokens v_u is over; a share is a mean of 0/1)
#   count:        v_b = sum_u v_u
MEAN, SHARE, COUNT = "mean", "share", "count"
MICRO_BATCH_KINDS: Mapping[str, str] = MappingProxyType({
    "actor/off_policy_kl": MEAN,
    "actor/kl_ref": MEAN,
    "actor/entropy": MEAN,
    "actor/clipfrac_high": SHARE,
    "actor/clipfrac_low": SHARE,
    "actor/clipfrac_pos_adv": SHARE,
    "actor/clipfrac_neg_adv": SHARE,
    "actor/masked_seqs": COUNT,
    "actor/low_ratio_neg_seqs": COUNT,
})
# Families of verl's own keys that a verl run's rows keep as verl logs them (prefix -> meaning).
VERL_FAMILIES: Mapping[str, str] = MappingProxyType({
    "timing_s/": "verl: wall seconds of one phase of the step",
    "timing_per_token_ms/": "verl: milliseconds per token of one phase",
    "response_length/": "verl: response-length statistics",
    "prompt_length/": "verl: prompt-length statistics",
    "critic/": "verl: reward, score, advantage and return statistics (no critic is trained)",
    "val-core/": "verl: validation metric of one data source (val-core/<src>/<metric>/mean@<k>)",
    "val-aux/": "verl: auxiliary validation statistics",
    "training/": "verl: trainer bookkeeping (global step, epoch)",
    "perf/": "verl: throughput and memory (perf/mfu, perf/max_memory_allocated_gb, ...)",
    "actor/": "verl: other actor statistics verl computes itself (e.g. actor/lr, actor/pg_clipfrac)",
})
# How a figure panel (arena/analysis/figures.py) and a W&B dashboard panel show a key:
# key -> (panel title, y-axis label, (low, high) range of the metric; None = open). The figures
# take their panels from here by key, so a key renamed in METRICS without this table fails at
# import, never by a curve silently missing from a plot.
PLOT_LABELS: Mapping[str, tuple[str, str, tuple]] = MappingProxyType({
    "eval/success_rate": ("Eval success (greedy)", "success rate", (0.0, 1.0)),
    "train/success_rate": ("Train success (sampled)", "success rate", (0.0, 1.0)),
    "actor/off_policy_kl": ("Off-policy KL", "KL(old || current)", (None, None)),
    "actor/kl_ref": ("KL to reference", "KL to ref (k3)", (0.0, None)),
    "actor/grad_norm": ("Grad norm", "grad norm", (0.0, None)),
    "rollout/format_valid_ratio": ("Format-valid ratio", "format-valid ratio", (0.0, 1.0)),
    "actor/clipfrac_pos_adv": ("Clip fraction, A > 0", "clip fraction", (0.0, 1.0)),
    "actor/clipfrac_neg_adv": ("Clip fraction, A < 0", "clip fraction", (0.0, 1.0)),
    "actor/masked_seqs": ("Masked sequences", "masked sequences", (0.0, None)),
})
# fmt: on
_UNKNOWN = [key for key in [*PLOT_LABELS, *MICRO_BATCH_KINDS] if key not in METRICS]
if _UNKNOWN:
    raise KeyError(f"PLOT_LABELS or MICRO_BATCH_KINDS keys not in METRICS: {_UNKNOWN} (arena/metric_keys.py)")


def meaning(key: str) -> str:
    """The glossary line of `key` (an exact key, else its verl family); KeyError if unknown."""
    if key in METRICS:
        return METRICS[key]
    for prefix, line in VERL_FAMILIES.items():
        if key.startswith(prefix):
            return line
    raise KeyError(f"metric key {key!r} is not in the glossary (arena/metric_keys.py)")


def panel(key: str) -> tuple[str, str, str, tuple]:
    """(key, panel title, y-axis label, range) of a plotted key; KeyError naming the key when
    it is not in the glossary or has no PLOT_LABELS entry."""
    meaning(key)
    if key not in PLOT_LABELS:
        raise KeyError(f"metric key {key!r} has no plot label (PLOT_LABELS in arena/metric_keys.py)")
    return (key, *PLOT_LABELS[key])


def glossary_table() -> str:
    """The Markdown table of METRICS, as docs/design.md holds it."""
    rows = ["| key | meaning |", "|---|---|"]
    rows += [f"| `{key}` | {line} |" for key, line in METRICS.items()]
    return "\n".join(rows)
