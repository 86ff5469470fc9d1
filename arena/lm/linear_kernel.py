"""The embedded model's linear layers on oneDNN's float32 matmul ("onednn"), or torch's ("torch").

Every projection of the model (q, k, v, o, gate, up, down, lm_head) is y = x W^T + b. On the CPU,
torch's `F.linear` runs MKL's sgemm. On AMD CPUs (the CI kind of machine: an EPYC with AVX-512)
MKL takes its generic code path, while oneDNN, which torch also ships, picks its kernels by the CPU's
instruction set. Measured on that machine (1 thread, float32, 12800 rows; docs/design.md, "Linear
layers on oneDNN"): y = x W^T at 193-235 GFLOP/s against MKL's 72-90, dx = dy W at 214-225 against
88-95, dW = dy^T x at 110-159 against 88-96. Both accumulate in float32: the results agree up to
float rounding (their summation orders differ), not bit for bit.

`OneDnnLinear` is an nn.Linear (same parameters, same state dict, saved and loaded as one) whose
forward runs, on CPU float32 tensors with at least one row,
    y  = x W^T + b                  oneDNN, forward
    dx = dy W                       oneDNN (W^T given as the "weight" of a linear)
    dW = dy^T x                     oneDNN (x^T given as the "weight")
    db = sum over rows of dy
and `F.linear` anywhere else (a GPU, float64, an empty batch, a torch built without oneDNN).
`set_linear_kernel(model, kernel)` switches every nn.Linear of a model in place; the benchmarks'
reference paths switch theirs back to "torch".
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

LINEAR_KERNEL = "onednn"  # the embedded model's default
LINEAR_KERNELS = (LINEAR_KERNEL, "torch")


def onednn_available() -> bool:
    """Whether this torch has oneDNN's fused linear op (x86 and most ARM builds do)."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def _onednn_linear(x2: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x2 [M, K], weight [N, K], bias [N] or None -> x2 weight^T + bias [M, N] (oneDNN, float32)."""
    return torch.ops.mkldnn._linear_pointwise(x2, weight, bias, "none", [], "")  # [M, N]


class OneDnnLinearFunction(torch.autograd.Function):
    """y = x W^T + b with its three matmuls on oneDNN (module docstring)."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        x2 = x.reshape(-1, x.shape[-1])  # [M, K]
        ctx.save_for_backward(x2, weight)
        ctx.has_bias = bias is not None
        y2 = _onednn_linear(x2, weight, bias)  # [M, N]
        return y2.reshape(*x.shape[:-1], weight.shape[0])  # [..., N]

    @staticmethod
    def backward(ctx, grad_y):
        x2, weight = ctx.saved_tensors  # [M, K], [N, K]
        g2 = grad_y.reshape(-1, grad_y.shape[-1]).contiguous()  # [M, N]
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            # dx = dy W = dy (W^T)^T: a linear with weight W^T [K, N]
            grad_x = _onednn_linear(g2, weight.t().contiguous(), None).reshape(*grad_y.shape[:-1], weight.shape[1])  # [..., K]
        if ctx.needs_input_grad[1]:
            # dW = dy^T x = dy^T (x^T)^T: a linear of dy^T [N, M] with weight x^T [K, M]
            grad_w = _onednn_linear(g2.t(), x2.t(), None)  # [N, K]
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = g2.sum(dim=0)  # [N]: db = sum_m dy[m]
        return grad_x, grad_w, grad_b


class OneDnnLinear(torch.nn.Linear):
    """nn.Linear whose forward runs on oneDNN where it can (module docstring)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.weight
        if x.device.type != "cpu" or x.dtype != torch.float32 or w.dtype != torch.float32 or x.numel() == 0:
            return F.linear(x, w, self.bias)
        return OneDnnLinearFunction.apply(x, w, self.bias)  # [..., N]


def set_linear_kernel(model: torch.nn.Module, kernel: str = LINEAR_KERNEL) -> torch.nn.Module:
    """Switch every nn.Linear of `model` to `kernel` in place ("onednn": OneDnnLinear, falling back
    to "torch" where this torch has no oneDNN; "torch": plain nn.Linear); return `model`. Only the
    class changes: parameters, their names and tied weights stay as they are."""
    if kernel not in LINEAR_KERNELS:
        raise ValueError(f"unknown linear kernel {kernel!r}; valid: {', '.join(LINEAR_KERNELS)}")
    cls = OneDnnLinear if kernel == LINEAR_KERNEL and onednn_available() else torch.nn.Linear
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            module.__class__ = cls
    return model


def linear_kernel_of(model: torch.nn.Module) -> str:
    """"onednn" when any linear layer of `model` runs on oneDNN, else "torch"."""
    return LINEAR_KERNEL if any(isinstance(m, OneDnnLinear) for m in model.modules()) else "torch"
