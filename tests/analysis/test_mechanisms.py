"""report/mechanisms.md (arena/analysis/mechanisms.py): what each arm's dimension did, from the
tidy frame, with a note for each dimension that did not act. Expected values by hand."""
import pandas as pd

from arena.analysis.mechanisms import mechanism_table, notes, render_mechanisms


def tidy(rows):
    """rows: (arm, run, step, metric, value) -> a tidy frame with the columns mechanisms reads."""
    return pd.DataFrame(rows, columns=["arm", "run", "step", "metric", "value"])


def test_means_over_steps_then_runs_and_the_max_step():
    frame = tidy([
        # arm a, run r1: outside band per step = high + low: step 1: 0.1 + 0.0 = 0.1, step 2: 0.2 + 0.1 = 0.3
        ("a", "r1", 1, "actor/clipfrac_high", 0.1), ("a", "r1", 1, "actor/clipfrac_low", 0.0),
        ("a", "r1", 2, "actor/clipfrac_high", 0.2), ("a", "r1", 2, "actor/clipfrac_low", 0.1),
        # run r2: step 1: 0.0; step 0 (the BC eval) is not an RL step and is ignored
        ("a", "r2", 1, "actor/clipfrac_high", 0.0), ("a", "r2", 1, "actor/clipfrac_low", 0.0),
        ("a", "r2", 0, "actor/clipfrac_high", 0.9),
        ("a", "r1", 1, "filter/kept_group_frac", 0.5), ("a", "r1", 2, "filter/kept_group_frac", 1.0),
        ("b", "r3", 1, "actor/clipfrac_high", 0.0), ("b", "r3", 1, "actor/clipfrac_low", 0.0),
    ])
    table = mechanism_table(frame, ["a", "b", "c"]).set_index("arm")
    # a: run means r1 = (0.1 + 0.3) / 2 = 0.2, r2 = 0.0 -> arm mean 0.1 -> 10 %; max step 0.3 -> 30 %
    assert round(table.loc["a", "outside_band"], 9) == 10.0 and round(table.loc["a", "outside_band_max"], 9) == 30.0
    # kept groups: r1 (0.5 + 1.0) / 2 = 0.75 -> 75 %; r2 did not log it: not counted as zero
    assert table.loc["a", "kept_groups"] == 75.0
    assert table.loc["b", "outside_band"] == 0.0 and pd.isna(table.loc["b", "kept_groups"])
    assert table.loc["c"].isna().all()  # an arm with no run: blank, never zero


def test_a_dimension_that_did_not_act_is_said_and_one_that_acted_is_not():
    frame = tidy([(arm, arm + "1", 1, metric, value) for arm in ("grpo", "cispo") for metric, value in (
        ("actor/clipfrac_high", 0.0), ("actor/clipfrac_low", 0.0), ("filter/kept_group_frac", 1.0),
        ("adv/anchor_repeat_frac", 0.25), ("rollout/response_length_std", 0.4))])
    said = notes(mechanism_table(frame, ["grpo", "cispo"]))
    assert any(s.startswith("No token left any arm's clip band") for s in said)
    assert any(s.startswith("Filtering dropped no group") for s in said)
    assert any(s.startswith("Replies had nearly one length") for s in said)
    assert not any("anchor" in s for s in said)  # 25 % repeats: the advantage dimension could act
    # one token outside the band at one step of one arm: clipping acted, no clipping note
    acted = pd.concat([frame, tidy([("cispo", "cispo1", 2, "actor/clipfrac_high", 0.01)])])
    assert not any("clip band" in s for s in notes(mechanism_table(acted, ["grpo", "cispo"])))
    text = render_mechanisms(mechanism_table(frame, ["grpo", "cispo"]), name="x")
    assert "| grpo | 0 | 100 | 25 | 0.4 | 0 |" in text


def test_the_report_writes_mechanisms_md(report_dir):
    text = (report_dir / "mechanisms.md").read_text()
    assert text.startswith("## What each arm's dimension did: ") and "| arm |" in text
