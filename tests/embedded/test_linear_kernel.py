"""OneDnnLinear (arena/lm/linear_kernel.py): the same y, dx, dW, db as nn.Linear (exactly where
every product and sum is exact in float32, up to float rounding elsewhere), the same parameters and
state dict, kept through deepcopy and save/load, and switched back by set_linear_kernel."""
import copy

import pytest
import torch

from arena.lm.linear_kernel import (LINEAR_KERNEL, OneDnnLinear, linear_kernel_of, onednn_available,
                                    set_linear_kernel)
from arena.lm.model import build_model, load_model, save_checkpoint
from arena.lm.tokenizer import build_tokenizer

needs_onednn = pytest.mark.skipif(not onednn_available(), reason="this torch has no oneDNN")


def _layer(weight, bias):
    layer = OneDnnLinear(weight.shape[1], weight.shape[0], bias=bias is not None)
    with torch.no_grad():
        layer.weight.copy_(weight)
        if bias is not None:
            layer.bias.copy_(bias)
    return layer


@needs_onednn
def test_small_case_by_hand():
    # x = [[1, 2]], W = [[3, 4], [5, 6]], b = [1, -1]:
    #   y = x W^T + b = [1*3 + 2*4 + 1, 1*5 + 2*6 - 1] = [12, 16]
    # loss = sum(y * c) with c = [[1, 2]], so dy = c:
    #   dx = dy W   = [1*3 + 2*5, 1*4 + 2*6] = [13, 16]
    #   dW = dy^T x = [[1*1, 1*2], [2*1, 2*2]] = [[1, 2], [2, 4]]
    #   db = dy     = [1, 2]
    # small integers: every product and sum is exact in float32, so equality is exact
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
@pytest.mark.parametrize("shape", [(5, 48), (3, 7, 48), (300, 48)])
def test_matches_nn_linear_up_to_float_rounding(shape):
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
    # float32 sums of <= 300 terms of size ~|x||W| ~ 1-10: rounding is ~1e-5 of the values' size;
    # a wrong transpose or a missing term is off by O(1)
    for a, b in zip(*grads):
        assert a.shape == b.shape
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-4), (a - b).abs().max()


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
