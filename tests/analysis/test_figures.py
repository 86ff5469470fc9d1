import io

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.legend import Legend

from arena.analysis import figures as F
from arena.analysis import figure_style as S

from .synthetic import ENVS, GRID

ARMS = sorted(GRID)
# the 13 arms of sweeps/grids/testbed_curves.yaml with their preset groups
TESTBED = (("grpo", "baseline"), ("grpo_mb8", "baseline"), ("gspo", "clipping"), ("cispo", "clipping"),
           ("sapo", "clipping"), ("cispo_sm", "clipping"), ("sapo_sm", "clipping"), ("cispo_mb8", "clipping"),
           ("cispo_sm_mb8", "clipping"), ("sapo_mb8", "clipping"), ("sapo_sm_mb8", "clipping"),
           ("gigpo", "advantage"), ("sampo", "combined"))
STATUSES = (("done", True), ("done", False), ("done", "unresolved"), ("collapsed", True), ("failed", None), ("missing", None))


def _panels(fig):
    return [(ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) for ax in fig.axes]


def _frames(n_arms: int, seed: int = 0):
    """A tidy and a runs frame of n_arms testbed arms x 3 seeds x 11 steps, random values; seed
    0's masked_seqs is 0 and seed 2's is 3x the mean, so mean - std < 0 where a band is drawn."""
    rng = np.random.default_rng(seed)
    tidy, runs = [], []
    for a, (arm, group) in enumerate(TESTBED[:n_arms]):
        for s in range(3):
            status, stable = STATUSES[(a + s) % len(STATUSES)]
            runs.append(dict(arm=arm, group=group, env="sokoban", seed=s, status=status, stable=stable,
                             var_last20=np.nan if status in ("failed", "missing") else rng.uniform(0, 0.004),
                             noise_floor=0.0009, theta=0.0025))
            for step in range(11):
                for metric, *_ in F.FIG3_PANELS + F.FIG4_PANELS:
                    value = [0.0, 1.0, 2.0][s] * 1.5 if metric == "actor/masked_seqs" else rng.uniform(0.0, 1.0)
                    tidy.append(dict(arm=arm, group=group, env="sokoban", seed=s, step=step, metric=metric, value=value))
    return pd.DataFrame(tidy), pd.DataFrame(runs)


def layout_defects(fig) -> list[str]:
    """Render, then list every text or legend past the figure's edge, every legend over a data
    axes, and every axes whose labels reach into another axes (matplotlib window extents, pixels)."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    page = fig.bbox
    inside = lambda b: b.x0 >= page.x0 - 0.5 and b.y0 >= page.y0 - 0.5 and b.x1 <= page.x1 + 0.5 and b.y1 <= page.y1 + 0.5  # noqa: E731
    defects = []
    for ax in fig.axes:
        if not inside(ax.get_tightbbox(renderer)):
            defects.append(f"axes {ax.get_title()!r}: labels past the figure edge")
        for other in fig.axes:
            if other is not ax and ax.get_tightbbox(renderer).overlaps(other.bbox):
                defects.append(f"axes {ax.get_title()!r} reaches into {other.get_title()!r}")
    texts = [t for t in [fig._suptitle, *fig.texts] if t is not None and t.get_text()]
    defects += [f"text {t.get_text()!r} past the edge" for t in texts if not inside(t.get_window_extent(renderer))]
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    for legend in legends:
        box = legend.get_window_extent(renderer)
        if not inside(box):
            defects.append("legend past the figure edge")
        defects += [f"legend over axes {ax.get_title()!r}" for ax in fig.axes if box.overlaps(ax.bbox)]
    return defects


@pytest.mark.parametrize("n_arms", [1, 4, 13])
@pytest.mark.parametrize("kind", ["fig3", "fig4", "stability"])
def test_layout_has_no_clipped_text_and_no_legend_over_data(kind, n_arms):
    tidy, runs = _frames(n_arms)
    if kind == "stability":
        fig = F.stability_figure(runs, baseline="grpo")
    else:
        draw = F.training_dynamics_figure if kind == "fig3" else F.is_analysis_figure
        fig = draw(tidy, "sokoban", baseline="grpo")
    assert layout_defects(fig) == []
    assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in fig.axes)
    if kind == "fig3":
        assert fig.get_size_inches()[0] == S.PAPER_WIDTH_IN and fig.axes[0].get_gridspec().get_geometry() == (2, 3)
    matplotlib.pyplot.close(fig)


def test_layout_check_catches_a_legend_on_the_data():
    # the defect of the old Fig 4: a legend inside the last panel, a y label cut at the left edge
    tidy, _ = _frames(4)
    fig = F.is_analysis_figure(tidy, "sokoban")
    fig.legends.clear()
    fig.axes[2].legend(loc="center")
    fig.axes[0].set_ylabel("a very long label " * 6)
    defects = layout_defects(fig)
    assert "legend over axes 'Masked sequences'" in defects
    matplotlib.pyplot.close(fig)


def test_bands_stay_in_the_metric_range():
    # masked_seqs per seed 0, 1.5, 3: mean 1.5, std sqrt(1.5) = 1.22; the band is [0.28, 2.72],
    # inside [0, inf); 13 arms draw no band. Success bands stay in [0, 1].
    tidy, _ = _frames(1)
    fig = F.is_analysis_figure(tidy, "sokoban", baseline="grpo")
    (band,) = fig.axes[2].collections
    y = band.get_paths()[0].vertices[:, 1]
    assert y.min() == pytest.approx(1.5 - np.sqrt(1.5)) and y.max() == pytest.approx(1.5 + np.sqrt(1.5))
    masked = tidy.metric == "actor/masked_seqs"
    tidy.loc[masked, "value"] = np.where(tidy.loc[masked, "seed"] == 2, 9.0, 0.0)  # [0, 0, 9]: mean 3, std sqrt(18) = 4.24
    fig = F.is_analysis_figure(tidy, "sokoban", baseline="grpo")
    assert fig.axes[2].collections[0].get_paths()[0].vertices[:, 1].min() == 0.0  # 3 - 4.24 clipped to 0
    fig3 = F.training_dynamics_figure(_frames(1)[0], "sokoban")
    for ax in (fig3.axes[0], fig3.axes[1], fig3.axes[5]):
        y = ax.collections[0].get_paths()[0].vertices[:, 1]
        assert 0.0 <= y.min() and y.max() <= 1.0
    assert len(F.training_dynamics_figure(_frames(13)[0], "sokoban").axes[0].collections) == 0  # 13 arms: no bands
    matplotlib.pyplot.close("all")


def test_styles_baseline_black_one_hue_per_group():
    arms = [a for a, _ in TESTBED]
    styles = S.arm_styles(arms, dict(TESTBED), "grpo")
    assert styles["grpo"] == S.BASELINE_STYLE
    clipping = [a for a, g in TESTBED if g == "clipping"]
    # 9 clipping arms: distinct (shade, line style) pairs, all from the Blues colormap
    assert len({(styles[a]["color"], styles[a]["ls"]) for a in clipping}) == 9
    blues = matplotlib.colormaps["Blues"]
    assert all(styles[a]["color"] in [blues(float(s)) for s in np.linspace(0.95, 0.45, 9)] for a in clipping)
    assert styles["gigpo"]["color"] != styles["sampo"]["color"]
    # more than 8 arms: one figure per group, each with the baseline first
    sets = S.group_sets(arms, dict(TESTBED), "grpo")
    assert [(label, members[0], len(members)) for label, members in sets] == [
        ("baseline", "grpo", 2), ("clipping", "grpo", 10), ("advantage", "grpo", 2), ("combined", "grpo", 2)]
    assert S.group_sets(arms[:8], dict(TESTBED), "grpo") == [("", arms[:8])]


def test_training_dynamics_panels(tidy):
    fig = F.training_dynamics_figure(tidy, "sokoban", arm_order=GRID, baseline="grpo")
    assert matplotlib.get_backend().lower() == "agg"
    assert _panels(fig) == [("Eval success (greedy)", "step", "success rate"),
                            ("Train success (sampled)", "step", "success rate"), ("Off-policy KL", "step", "KL(old || current)"),
                            ("KL to reference", "step", "KL to ref (k3)"), ("Grad norm", "step", "grad norm"),
                            ("Format-valid ratio", "step", "format-valid ratio")]
    success = fig.axes[0]
    assert [line.get_label() for line in success.get_lines()] == list(GRID)  # one line per arm, grid order
    assert len(success.collections) == len(GRID)  # 4 arms: one seed band each
    # gspo's line is the seed mean of the final eval at step 10: mean(0.55, 0.65, 0.75) = 0.65
    gspo = next(line for line in success.get_lines() if line.get_label() == "gspo")
    assert gspo.get_ydata()[-1] == pytest.approx(0.65, rel=1e-12)
    # step 0 is the BC start, synthetic.INITIAL["sokoban"] = 0.5, for every arm
    assert gspo.get_ydata()[0] == pytest.approx(0.5, rel=1e-12)
    # the eval panel has points only at the eval steps of synthetic.py: 0, 8, 9, 10
    assert list(gspo.get_xdata()) == [0, 8, 9, 10]
    grpo = next(line for line in success.get_lines() if line.get_label() == "grpo")
    assert grpo.get_color() == "black"
    train = next(line for line in fig.axes[1].get_lines() if line.get_label() == "gspo")
    assert list(train.get_xdata()) == list(range(11))  # train rows at every step 0..10
    matplotlib.pyplot.close(fig)


def test_is_analysis_panels(tidy):
    fig = F.is_analysis_figure(tidy, "household")
    assert _panels(fig) == [("Clip fraction, A > 0", "step", "clip fraction"), ("Clip fraction, A < 0", "step", "clip fraction"),
                            ("Masked sequences", "step", "masked sequences")]
    assert [line.get_label() for line in fig.axes[2].get_lines()] == ARMS
    assert fig._suptitle.get_text() == "IS analysis — household (mean over seeds ± sd)"
    matplotlib.pyplot.close(fig)


def test_stability_markers_by_status(runs):
    fig = F.stability_figure(runs, arm_order=GRID, baseline="grpo")
    assert [ax.get_title() for ax in fig.axes] == list(ENVS)
    ax = fig.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("arm", "var_last20")
    assert [t.get_text() for t in ax.get_xticklabels()] == list(GRID)
    theta = [line for line in ax.get_lines() if line.get_ydata()[0] == 0.0025]
    assert len(theta) == 1
    # sokoban's 12 runs (synthetic.STATUS / STABLE): gspo s1 unresolved, grpo_4mb s2 failed,
    # sampo s2 collapsed, the other 9 stable; no run unstable or missing there
    points = {c.get_label(): len(c.get_offsets()) for c in ax.collections if not c.get_label().startswith("_")}
    assert points == {"stable": 9, "unresolved (window too short)": 1, "collapsed": 1, "failed (no value, at 0)": 1}
    # household's missing run (grpo_4mb s1) reaches the legend too
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "missing (no value, at 0)" in labels and "theta" in labels and isinstance(fig.legends[0], Legend)
    matplotlib.pyplot.close(fig)


def test_report_writes_png_and_pdf(report_dir):
    names = sorted(p.name for p in (report_dir / "figures").iterdir())
    stems = [f"fig3_{e}" for e in ENVS] + [f"fig4_{e}" for e in ENVS] + ["stability"]
    assert names == sorted(f"{s}.{ext}" for s in stems for ext in ("pdf", "png"))


def test_per_group_files_above_eight_arms(tmp_path, monkeypatch):
    # the file plan only: each drawing function is replaced by one that records the arms it got
    drawn = []

    def record(kind):
        def draw(tidy, env, *, arm_order=None, baseline=None, arms=None, group_of=None):
            drawn.append((kind, tuple(arms)))
            return matplotlib.pyplot.figure(figsize=(1, 1))
        return draw

    monkeypatch.setattr(F, "training_dynamics_figure", record("fig3"))
    monkeypatch.setattr(F, "is_analysis_figure", record("fig4"))
    tidy, runs = _frames(13)
    paths = F.write_figures(tidy, runs, tmp_path, arm_order=[a for a, _ in TESTBED], baseline="grpo")
    assert [p.name for p in paths] == [f"{k}_sokoban_{g}.png" for g in ("baseline", "clipping", "advantage", "combined")
                                       for k in ("fig3", "fig4")] + ["stability.png"]
    assert drawn[0] == ("fig3", ("grpo", "grpo_mb8")) and drawn[-1] == ("fig4", ("grpo", "sampo"))
    assert all(p.exists() for p in paths)


def test_figure_bytes_are_deterministic(runs):
    def render(fmt):
        fig = F.stability_figure(runs)
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, metadata=F.PDF_METADATA if fmt == "pdf" else F.PNG_METADATA)
        matplotlib.pyplot.close(fig)
        return buf.getvalue()

    assert render("pdf") == render("pdf")
    assert render("png") == render("png")


def test_no_format_runs_get_their_own_marker():
    # a run that never had the format is neither stable nor collapsed (docs/design.md §E): its
    # status decides the marker, whatever its `stable` says
    assert F.run_status("no_format", True) == "no_format"
    assert F.run_status("collapsed", True) == "collapsed"
    assert F.run_status("done", True) == "stable" and F.run_status("done", False) == "unstable"
    assert F.run_status("done", "unresolved") == "unresolved"
    assert F.STATUS_MARKERS["no_format"][0].startswith("no format")
