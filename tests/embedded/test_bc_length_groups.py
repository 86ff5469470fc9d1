"""Length-grouped SFT mini-batches (bc.group_by_length, arena/bc/train.py): one pool draws
groups x batch_size distinct rows, sorts them by length and cuts them into mini-batches in
random order; off (0), the SFT draws exactly as before."""
import random

import torch

from arena.bc.train import length_grouped_rows, sft
from arena.lm.model import build_model


def test_a_pool_sorts_its_draw_by_length_and_cuts_it():
    # 10 rows, lengths 10 - row (row 9 shortest); groups 2 x batch 3 = 6 distinct rows drawn
    lengths = [10 - row for row in range(10)]
    batches = length_grouped_rows(lengths, 3, 2, random.Random(0))
    drawn = sorted(row for b in batches for row in b)
    assert len(batches) == 2 and all(len(b) == 3 for b in batches) and len(set(drawn)) == 6
    # the draw, sorted by length, is cut in order: every length of the shorter batch <= every
    # length of the longer one
    short, long = sorted(batches, key=lambda b: max(lengths[r] for r in b))
    assert max(lengths[r] for r in short) <= min(lengths[r] for r in long)
    # fewer rows than groups x batch: all rows, the last mini-batch shorter (7 = 3 + 3 + 1)
    batches = length_grouped_rows([5, 1, 4, 2, 3, 7, 6], 3, 4, random.Random(1))
    assert sorted(len(b) for b in batches) == [1, 3, 3]
    assert sorted(r for b in batches for r in b) == list(range(7))
    # sorted by length across the pool: concatenated in order of their shortest row, lengths rise
    ordered = [r for b in sorted(batches, key=lambda b: min([5, 1, 4, 2, 3, 7, 6][r] for r in b)) for r in b]
    assert [[5, 1, 4, 2, 3, 7, 6][r] for r in ordered] == [1, 2, 3, 4, 5, 6, 7]


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
    for name, kw in (("default", {}), ("zero", {"group_by_length": 0}), ("grouped", {"group_by_length": 4})):
        model = build_model(48, size="tiny", seed=0)
        runs[name] = (sft(model, _Tok(), pairs, steps=30, lr=3e-3, batch_size=8, seed=0, log=lambda *_: None, **kw),
                      torch.cat([p.detach().flatten() for p in model.parameters()]))
    # group_by_length=0 draws and pads exactly as before: the same losses and weights, bit for bit
    assert runs["zero"][0] == runs["default"][0] and torch.equal(runs["zero"][1], runs["default"][1])
    # grouped: other mini-batches (other losses), and the loss falls (the mean of the last 5 steps
    # below the mean of the first 5)
    grouped = runs["grouped"][0]
    assert grouped != runs["default"][0]
    assert sum(grouped[-5:]) / 5 < sum(grouped[:5]) / 5
