import pytest
import torch


@pytest.fixture(scope="module")
def one_thread():
    """Tiny models run as fast on one thread, and a busy 2-core box stalls 2-thread OpenMP."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
