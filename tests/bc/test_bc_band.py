"""BC's validation-band stop (arena.bc.stop): which check stops SFT, which
rooms it validates on, and what the report says. The evaluation is replaced by a scripted curve."""
import pytest

from arena.bc import stop as bc_stop
from arena.config import load_config
from arena.envs import is_eval_seed


class _Model:
    def train(self):
        return self


def _band_stop(monkeypatch, curve: dict, **overrides):
    cfg = load_config([f"bc.{k}={v}" for k, v in overrides.items()])
    seen = []

    def fake_evaluate(model, tokenizer, cfg, *, temperature, seeds):
        seen.append(seeds)
        return {"success_rate": curve[len(seen) - 1]}

    monkeypatch.setattr(bc_stop, "evaluate", fake_evaluate)
    return bc_stop.BandStop.from_config(cfg, _Model(), None, log=lambda *_: None), seen


def test_stops_after_confirm_checks_in_a_row(monkeypatch):
    # checks at steps 300, 320, ...: 0.31 (a spike), 0.20, 0.33, 0.36 -> two in a row >= 0.30 at
    # the 4th check, step 360; steps between checks never evaluate
    stop, seen = _band_stop(monkeypatch, [0.31, 0.20, 0.33, 0.36], band="[0.30,0.45]", confirm=2,
                            min_steps=300, val_every=20, steps=1500)
    stopped = next(step for step in range(1, 1501) if stop(step))
    assert stopped == 360 and len(seen) == 4
    report = stop.report()
    assert report["val_success"] == 0.36 and report["in_band"] is True
    assert report["val_curve"][:4] == [[300, 0.31], [320, 0.20], [340, 0.33], [360, 0.36]]
    # the validation rooms are training seeds, none of them an eval seed, none a demo seed (< demos)
    assert all(not is_eval_seed(s) and s >= 1000 for s in seen[0]) and len(seen[0]) == 256


def test_overshoot_is_reported_out_of_band(monkeypatch):
    stop, _ = _band_stop(monkeypatch, [0.10, 0.50], band="[0.30,0.45]", confirm=1, min_steps=20, val_every=20, steps=100)
    assert not stop(20) and stop(40)
    assert stop.report()["in_band"] is False and stop.report()["val_success"] == 0.50


def test_no_band_means_fixed_steps_and_bad_band_is_an_error(monkeypatch):
    assert bc_stop.BandStop.from_config(load_config(["budget=smoke"]), _Model(), None) is None  # schema default: band []
    with pytest.raises(ValueError, match="bc.band"):
        _band_stop(monkeypatch, [], band="[0.5,0.2]")


def test_env_without_validation_split_is_named_in_the_log_and_report(monkeypatch):
    # household's committed pool has no validation games (arena.envs.validation_size == 0): its
    # validation seeds play training games, which BC must say instead of reporting "validation"
    logs = []
    cfg = load_config(["env=household", "env.kwargs.pool=committed", "bc.band=[0.3,0.45]"])
    monkeypatch.setattr(bc_stop, "evaluate", lambda *a, **k: {"success_rate": 0.5})
    stop = bc_stop.BandStop.from_config(cfg, _Model(), None, log=logs.append)
    assert stop.report()["val_split"] == "train" and any("no validation split" in line for line in logs)
    sokoban, _ = _band_stop(monkeypatch, [0.5], band="[0.30,0.45]")
    assert sokoban.report()["val_split"] == "validation"
