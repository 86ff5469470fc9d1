"""Policy optimisation, split into the paper's four dimensions (docs/methods.md).

Pure torch: no I/O, no Hydra, no config objects. Each dimension is a registry of functions
with one signature; hyperparameters are keyword arguments:

    AGG[name](loss_tok [B,T], mask [B,T], *, norm=None) -> scalar
    CLIP[name](logp, old_logp, adv, mask, **hp) -> (loss_tok [B,T], metrics)
    FILTER[name](group_id [M], key [M], *, needed_groups, last_try, **hp) -> kept group ids
    ADV[name](batch: TurnBatch, **hp) -> adv [N]
    SEQ_MASK[name](logp, old_logp, adv, mask, **hp) -> policy-gradient mask [B,T]

Every registry is an `arena.po.members.Registry`: it derives each member's hyperparameters
from its signature and the per-turn fields it reads from `@reads`.

`METHODS` holds the presets; `compose.resolve` joins a preset with overrides, and
`compose.objective` builds the loss.
"""
from .advantages import ADV
from .aggregation import AGG, AggNorm
from .clipping import CLIP, SEQ_MASK, seq_mask
from .filtering import FILTER
from .methods import METHODS, Preset
from .types import TurnBatch, make_batch

__all__ = ["ADV", "AGG", "AggNorm", "CLIP", "FILTER", "METHODS", "Preset", "SEQ_MASK", "TurnBatch", "make_batch", "seq_mask"]
