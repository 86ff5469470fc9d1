"""Fixtures shared by the embedded backend's and the model kit's tests."""
import pytest
import torch


@pytest.fixture
def threads():
    """Set torch's intra-op threads for one test; put the count back after it."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)
