"""Our aggregation members by verl's name for them (verl's `actor.loss_agg_mode`): the verl
mapping lives in the verl backend; the pure core (arena/po/aggregation.py) knows no backend."""
from __future__ import annotations

# our registry name (arena.po.aggregation.AGG) -> verl's `loss_agg_mode`
VERL_AGG_MODE: dict[str, str] = {
    "token_mean": "token-mean",
    "seq_mean_token_mean": "seq-mean-token-mean",
    "seq_mean_token_sum": "seq-mean-token-sum",
    "seq_mean_token_sum_norm": "seq-mean-token-sum-norm",
}
