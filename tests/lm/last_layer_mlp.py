"""How many positions the sampler's packed decoder runs its last layer's MLP on: the decoder calls its
MLP through arena/lm/decoding.py's module-level `feed_forward`, which this swaps for a watching one."""
from contextlib import contextmanager

import arena.lm.decoding as decoding


@contextmanager
def last_layer_mlp_widths(model):
    """Yields a list that gets, at every call of `model`'s last-layer MLP in the packed decoder, the
    number of positions it ran on."""
    seen: list = []
    last_layer_weight = model.model.layers[-1].mlp.down_proj.weight

    def watched(layer, hidden):
        if layer.down[0] is last_layer_weight:
            seen.append(hidden.shape[1])
        return layer.feed_forward(hidden)

    saved, decoding.feed_forward = decoding.feed_forward, watched
    try:
        yield seen
    finally:
        decoding.feed_forward = saved
