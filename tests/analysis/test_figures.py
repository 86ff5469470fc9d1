import io

import matplotlib
import pytest

from arena.analysis import figures as F

from .synthetic import ENVS, GRID

ARMS = sorted(GRID)


def _panels(fig):
    return [(ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) for ax in fig.axes]


def test_training_dynamics_panels(tidy):
    fig = F.training_dynamics_figure(tidy, "sokoban", arm_order=GRID)
    assert matplotlib.get_backend().lower() == "agg"
    assert _panels(fig) == [("Eval success (greedy)", "step", "success rate"),
                            ("Train success (sampled)", "step", "success rate"), ("Off-policy KL", "step", "KL(old || current)"),
                            ("KL to reference", "step", "KL to ref"), ("Grad norm", "step", "grad norm"),
                            ("Format-valid ratio", "step", "format-valid ratio")]
    success = fig.axes[0]
    assert [line.get_label() for line in success.get_lines()] == list(GRID)  # one line per arm, grid order
    assert len(success.collections) == len(GRID)  # one seed band per arm
    # gspo's line is the seed mean of final*step/10 at step 10: mean(0.55, 0.65, 0.75) = 0.65
    gspo = next(line for line in success.get_lines() if line.get_label() == "gspo")
    assert gspo.get_ydata()[-1] == pytest.approx(0.65, rel=1e-12)
    # the eval panel has points only at the eval steps of synthetic.py: 0, 8, 9, 10
    assert list(gspo.get_xdata()) == [0, 8, 9, 10]
    train = next(line for line in fig.axes[1].get_lines() if line.get_label() == "gspo")
    assert list(train.get_xdata()) == list(range(11))  # train rows at every step 0..10
    matplotlib.pyplot.close(fig)


def test_is_analysis_panels(tidy):
    fig = F.is_analysis_figure(tidy, "household")
    assert _panels(fig) == [("Clip fraction, A > 0", "step", "clip fraction"), ("Clip fraction, A < 0", "step", "clip fraction"),
                            ("Masked sequences", "step", "masked sequences")]
    assert [line.get_label() for line in fig.axes[2].get_lines()] == ARMS
    assert fig._suptitle.get_text() == "IS analysis — household"
    matplotlib.pyplot.close(fig)


def test_stability_panels(runs):
    fig = F.stability_figure(runs, arm_order=GRID)
    assert [ax.get_title() for ax in fig.axes] == list(ENVS)
    ax = fig.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("arm", "var_last20")
    assert [t.get_text() for t in ax.get_xticklabels()] == list(GRID)
    theta = [line for line in ax.get_lines() if line.get_label() == "theta"]
    assert len(theta) == 1 and theta[0].get_ydata()[0] == 0.0025
    # finished sokoban runs: 12 - 1 failed = 11 var_last20 points
    assert len(ax.collections[0].get_offsets()) == 11
    matplotlib.pyplot.close(fig)


def test_report_writes_png_and_pdf(report_dir):
    names = sorted(p.name for p in (report_dir / "figures").iterdir())
    stems = [f"fig3_{e}" for e in ENVS] + [f"fig4_{e}" for e in ENVS] + ["stability"]
    assert names == sorted(f"{s}.{ext}" for s in stems for ext in ("pdf", "png"))


def test_figure_bytes_are_deterministic(runs):
    def render(fmt):
        fig = F.stability_figure(runs)
        buf = io.BytesIO()
        fig.savefig(buf, format=fmt, metadata=F.PDF_METADATA if fmt == "pdf" else F.PNG_METADATA)
        matplotlib.pyplot.close(fig)
        return buf.getvalue()

    assert render("pdf") == render("pdf")
    assert render("png") == render("png")
