"""Length-grouped SFT mini-batches (bc.group_by_length, arena/bc/train.py): an epoch of
transformers' LengthGroupedSampler cut into mini-batches; off (false), the SFT draws exactly as
before."""
import random

import torch

from arena.bc.train import length_grouped_batches, sft
from arena.lm.model import build_model


def test_an_epoch_holds_every_row_once_in_batches_of_about_one_length():
    # 400 rows, lengths 1..400 shuffled; batch 4 -> 100 mini-batches. LengthGroupedSampler's
    # mega-batch is min(400 // (4 * 4), 50) = 25 mini-batches (100 rows) sorted longest first,
    # so a mini-batch is 4 neighbours among 100 sorted draws from 400 lengths: 3 gaps of ~4, a
    # span of ~12; 4 uniform draws span 3/5 of the range on average, ~240. The bar is 40.
    lengths = random.Random(0).sample(range(1, 401), 400)
    batches = length_grouped_batches(lengths, 4, torch.Generator().manual_seed(0))
    assert len(batches) == 100 and all(len(b) == 4 for b in batches)
    assert sorted(r for b in batches for r in b) == list(range(400))  # every row once
    spans = [max(lengths[r] for r in b) - min(lengths[r] for r in b) for b in batches]
    assert sum(spans) / len(spans) < 40
    assert lengths[batches[0][0]] == 400  # the sampler puts the longest row first
    # the same seed gives the same epoch; the generator's next epoch is another order
    generator = torch.Generator().manual_seed(0)
    assert length_grouped_batches(lengths, 4, generator) == batches
    assert length_grouped_batches(lengths, 4, generator) != batches


class _Tok:
    """The two things _encode needs: encode (one id per character, 3 + ord % 40) and pad id 0."""
    pad_token_id = 0

    def encode(self, text, add_special_tokens=False):
        return [3 + ord(c) % 40 for c in text]


def _pairs():
    g = random.Random(0)
    return [("p" * g.randint(3, 30), "r" * g.randint(1, 5)) for _ in range(40)]


def test_off_is_the_default_path_and_on_trains(one_thread):
    pairs = _pairs()
    runs = {}
    for name, kw in (("default", {}), ("zero", {"group_by_length": False}), ("grouped", {"group_by_length": True})):
        model = build_model(48, size="tiny", seed=0)
        runs[name] = (sft(model, _Tok(), pairs, steps=30, lr=3e-3, batch_size=8, seed=0, log=lambda *_: None, **kw),
                      torch.cat([p.detach().flatten() for p in model.parameters()]))
    # group_by_length=false draws and pads exactly as before: the same losses and weights, bit for bit
    assert runs["zero"][0] == runs["default"][0] and torch.equal(runs["zero"][1], runs["default"][1])
    # grouped: other mini-batches (other losses), and the loss falls (the mean of the last 5 steps
    # below the mean of the first 5)
    grouped = runs["grouped"][0]
    assert grouped != runs["default"][0]
    assert sum(grouped[-5:]) / 5 < sum(grouped[:5]) / 5
