import os

# Offline by default: no test may reach the network (DEVELOPERS.md).
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest


SERIAL_GROUP = "serial"


def pytest_collection_modifyitems(config, items):
    """`gpu` tests skip where no CUDA device exists (CI has none); the slow stage's schedule."""
    schedule_slow_stage(items)
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except Exception:  # pragma: no cover - torch missing
        has_cuda = False
    if has_cuda:
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (marker: gpu)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def schedule_slow_stage(items) -> None:
    """The slow stage runs on two workers (`pytest -m slow -n 2 --dist loadgroup`, .ci/run):
    - every slow test NOT marked `side_by_side` joins one xdist group, so those run one after
      another on one worker as without xdist (one SLURM cluster, fixed Ray ports, kills timed
      against a known load), and that group goes first: it is the longest unit of work;
    - `side_by_side` tests (a learning bar's seed: one `arena train` process, one torch thread)
      are spread over both workers, longest first (`side_by_side(minutes=...)`), so the short
      ones fill the ends.
    Without -n the same order holds and nothing else changes (the group marker is then inert)."""
    def minutes(item) -> float:
        mark = item.get_closest_marker("side_by_side")
        return float(mark.kwargs.get("minutes", 0)) if mark else 0.0

    for item in items:
        if "slow" in item.keywords and item.get_closest_marker("side_by_side") is None:
            item.add_marker(pytest.mark.xdist_group(SERIAL_GROUP))
    # stable sort: fast tests and the serial group keep their order, ahead of side_by_side ones
    items.sort(key=lambda item: (item.get_closest_marker("side_by_side") is not None, -minutes(item)))


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for the module: tiny models run as fast on one thread, and a busy 2-core
    box stalls 2-thread OpenMP."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
