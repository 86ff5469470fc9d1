"""OneDnnLinear (arena/lm/linear_kernel.py): the same y, dx, dW, db as nn.Linear (exactly where
every product and sum is exact in float32, up to float rounding elsewhere), over rows padded to
padded_rows, small products left to F.linear, the same parameters and state dict, kept through
deepcopy and save/load, and switched back by set_linear_kernel."""
import copy

import pytest
import torch

import arena.lm.linear_kernel as linear_kernel
from arena.lm.linear_kernel import (LINEAR_KERNEL, OneDnnLinear, linear_kernel_of, onednn_available, padded_rows,
                                    set_linear_kernel)
from arena.lm.model import build_model, load_model, save_checkpoint
from arena.lm.tokenizer import build_tokenizer

needs_onednn = pytest.mark.skipif(not onednn_available(), reason="this torch has no oneDNN")


@pytest.fixture
def every_product_on_onednn(monkeypatch):
    """The tests' products are small: send them to oneDNN all the same."""
    monkeypatch.setattr(linear_kernel, "ONEDNN_MIN_MACS", 0)


def test_padded_rows_by_hand_and_its_bounds():
    # q = max(16, 2^(bits(m) - 4)); M' = ceil(m / q) q:
    #   m = 1: q = 16, M' = 16;  m = 16: M' = 16;  m = 17 (5 bits): q = 16, M' = 32
    #   m = 300 (9 bits): q = 32, ceil(300 / 32) = 10, M' = 320
    #   m = 5000 (13 bits): q = 512, ceil(5000 / 512) = 10, M' = 5120;  m = 4096 (13 bits): M' = 4096
    assert [padded_rows(m) for m in (1, 16, 17, 300, 5000, 4096)] == [16, 16, 32, 320, 5120, 4096]
    sizes = [padded_rows(m) for m in range(1, 1 << 15)]
    assert all(m <= p < m + max(16, m / 8) for m, p in zip(range(1, 1 << 15), sizes))  # < 12.5% more rows
    assert all(padded_rows(p) == p for p in sizes[:4096])  # a padded count is its own padding
    # ~8 sizes per octave: m in [2^(b-1), 2^b) lands on multiples of 2^(b-4): at most 8 (+ the octave's top)
    for b in range(8, 16):
        assert len({padded_rows(m) for m in range(1 << (b - 1), 1 << b)}) <= 9


def _layer(weight, bias):
    layer = OneDnnLinear(weight.shape[1], weight.shape[0], bias=bias is not None)
    with torch.no_grad():
        layer.weight.copy_(weight)
        if bias is not None:
            layer.bias.copy_(bias)
    return layer


@needs_onednn
def test_small_case_by_hand(every_product_on_onednn):
    # x = [[1, 2]], W = [[3, 4], [5, 6]], b = [1, -1]:
    #   y = x W^T + b = [1*3 + 2*4 + 1, 1*5 + 2*6 - 1] = [12, 16]
    # loss = sum(y * c) with c = [[1, 2]], so dy = c:
    #   dx = dy W   = [1*3 + 2*5, 1*4 + 2*6] = [13, 16]
    #   dW = dy^T x = [[1*1, 1*2], [2*1, 2*2]] = [[1, 2], [2, 4]]
    #   db = dy     = [1, 2]
    # small integers: every product and sum is exact in float32, so equality is exact (the 15
    # zero rows padding x and dy to padded_rows(1) = 16 add exact zeros to dW)
    layer = _layer(torch.tensor([[3.0, 4.0], [5.0, 6.0]]), torch.tensor([1.0, -1.0]))
    x = torch.tensor([[1.0, 2.0]], requires_grad=True)
    y = layer(x)
    assert y.grad_fn is not None and "OneDnnLinear" in type(y.grad_fn).__name__  # the oneDNN path ran
    assert torch.equal(y, torch.tensor([[12.0, 16.0]]))
    (y * torch.tensor([[1.0, 2.0]])).sum().backward()
    assert torch.equal(x.grad, torch.tensor([[13.0, 16.0]]))
    assert torch.equal(layer.weight.grad, torch.tensor([[1.0, 2.0], [2.0, 4.0]]))
    assert torch.equal(layer.bias.grad, torch.tensor([1.0, 2.0]))


@needs_onednn
@pytest.mark.parametrize("shape", [(5, 48), (3, 7, 48), (300, 48), (1000, 48)])
def test_matches_nn_linear_up_to_float_rounding(shape, every_product_on_onednn):
    g = torch.Generator().manual_seed(0)
    weight, bias = torch.randn(40, 48, generator=g), torch.randn(40, generator=g)
    ours, plain = _layer(weight, bias), torch.nn.Linear(48, 40)
    with torch.no_grad():
        plain.weight.copy_(weight)
        plain.bias.copy_(bias)
    x = torch.randn(*shape, generator=g)
    c = torch.randn(*shape[:-1], 40, generator=g)
    grads = []
    for layer in (ours, plain):
        xi = x.clone().requires_grad_(True)
        y = layer(xi)  # [..., 40]
        (y * c).sum().backward()
        grads.append((y.detach(), xi.grad, layer.weight.grad, layer.bias.grad))
    # float32 sums of <= 1000 terms of size ~|x||W| ~ 1-10: rounding is ~1e-5 of the values' size;
    # a wrong transpose or a missing term is off by O(1)
    for a, b in zip(*grads):
        assert a.shape == b.shape
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-4), (a - b).abs().max()


@needs_onednn
def test_small_products_stay_on_torch_and_large_ones_go_to_onednn():
    layer = _layer(torch.randn(40, 48), torch.randn(40))
    small, large = torch.randn(10, 48), torch.randn(600, 48)  # 10 * 48 * 40 < 2^20 <= 600 * 48 * 40 MACs
    assert torch.equal(layer(small), torch.nn.functional.linear(small, layer.weight, layer.bias))  # F.linear itself
    y = layer(large)
    assert "OneDnnLinear" in type(y.grad_fn).__name__


def test_only_x86_64_cpus_get_onednn(monkeypatch):
    # oneDNN's float32 linear was measured on x86-64 only: an ARM machine (an Apple-silicon laptop)
    # keeps torch's linear layers whatever its torch ships
    monkeypatch.setattr(linear_kernel.platform, "machine", lambda: "arm64")
    assert not onednn_available()
    assert linear_kernel_of(build_model(40, size="tiny", seed=3)) == "torch"


def test_falls_back_to_torch_for_float64_and_empty_batches():
    layer = _layer(torch.randn(4, 3), torch.randn(4)).double()
    x = torch.randn(2, 3, dtype=torch.float64)
    assert torch.equal(layer(x), torch.nn.functional.linear(x, layer.weight, layer.bias))
    empty = _layer(torch.randn(4, 3), None)(torch.zeros(0, 3))
    assert empty.shape == (0, 4)


def test_set_linear_kernel_switches_only_the_class():
    model = build_model(40, size="tiny", seed=3)
    expected = LINEAR_KERNEL if onednn_available() else "torch"
    assert linear_kernel_of(model) == expected
    keys = list(model.state_dict())
    tied = model.lm_head.weight is model.model.embed_tokens.weight
    set_linear_kernel(model, "torch")
    assert linear_kernel_of(model) == "torch"
    assert all(type(m) is torch.nn.Linear for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert list(model.state_dict()) == keys
    assert (model.lm_head.weight is model.model.embed_tokens.weight) == tied
    with pytest.raises(ValueError, match="valid: onednn, torch"):
        set_linear_kernel(model, "mkl")


@needs_onednn
def test_model_kernel_survives_deepcopy_and_save_load_and_matches_torch(tmp_path):
    tok = build_tokenizer(["push the box left", "go up and down"], vocab_size=270)
    model = build_model(len(tok), size="tiny", seed=3)
    assert linear_kernel_of(copy.deepcopy(model)) == LINEAR_KERNEL
    save_checkpoint(model, tok, tmp_path / "ckpt")
    loaded, _ = load_model(tmp_path / "ckpt")
    assert linear_kernel_of(loaded) == LINEAR_KERNEL
    plain = set_linear_kernel(copy.deepcopy(loaded), "torch")
    ids = torch.tensor([[5, 6, 7, 8, 9, 10]])  # [1, 6]
    with torch.no_grad():
        a, b = loaded(input_ids=ids).logits, plain(input_ids=ids).logits  # [1, 6, V] each
    # the same weights through two float32 kernels: logits of size ~1 agree to rounding
    assert torch.allclose(a, b, rtol=1e-5, atol=1e-5), (a - b).abs().max()
