import os

# Offline by default: no test may reach the network (DEVELOPERS.md).
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import pytest

from tests import slow_schedule


def pytest_collection_modifyitems(config, items):
    """`gpu` tests skip where no CUDA device exists (CI has none); the slow stage's order
    (tests/slow_schedule.py)."""
    slow_schedule.order(items)
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


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`-n 2` (`--dist load`, the default, or `loadgroup`): the slow stage's work units
    (tests/slow_schedule.py); the serial tests never share a SLURM cluster or Ray's ports."""
    if config.getvalue("dist") in ("load", "loadgroup"):
        return slow_schedule.make_scheduler(config, log)
    return None


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for the module: tiny models run as fast on one thread, and a busy 2-core
    box stalls 2-thread OpenMP."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def threads():
    """Set torch's intra-op threads for one test (the model kit's and the embedded backend's
    thread tests); put the count back after it."""
    import torch

    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)
