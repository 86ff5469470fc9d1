"""The embedded model's linear layers on oneDNN's float32 matmul ("onednn"), or torch's ("torch").

Every projection of the model (q, k, v, o, gate, up, down, lm_head) is y = x W^T + b. On the CPU,
torch's `F.linear` runs MKL's sgemm. On AMD CPUs (the CI kind of machine: an EPYC with AVX-512)
MKL takes its generic code path, while oneDNN, which torch also ships, picks its kernels by the CPU's
instruction set. Measured on that machine (1 thread, float32, 12800 rows; docs/design.md, "The
step's log-probs and update"): y = x W^T at 193-235 GFLOP/s against MKL's 72-90, dx = dy W at 214-225 against
88-95, dW = dy^T x at 110-159 against 88-96. Both accumulate in float32: the results agree up to
float rounding (their summation orders differ), not bit for bit.

`OneDnnLinear` is an nn.Linear (same parameters, same state dict, saved and loaded as one) whose
forward runs, on CPU float32 tensors, for products of at least ONEDNN_MIN_MACS multiply-adds,
    y  = x W^T + b                  oneDNN, forward
    dx = dy W                       oneDNN (W^T given as the "weight" of a linear)
    dW = dy^T x                     oneDNN (x^T given as the "weight")
    db = sum over rows of dy
with x's and dy's rows padded with zeros to `padded_rows` (a few sizes per octave, so that oneDNN's
per-shape primitives are built once and then found in its cache), and `F.linear` anywhere else
(small products, a GPU, float64, a CPU other than x86-64, a torch built without oneDNN). On the RL
step's real batches (fresh rollouts, so fresh shapes) this made log-probs + update 0.90x of torch's
time and the rollout 0.95x at one thread (the sweeps' jobs run one thread each), and equal to
torch's at two; without the padding and the small-product rule it was slower than torch's (every
new row count a cache miss).
`set_linear_kernel(model, kernel)` switches every nn.Linear of a model in place; the benchmarks'
reference paths switch theirs back to "torch".
"""
from __future__ import annotations

import platform

import torch
import torch.nn.functional as F

LINEAR_KERNEL = "onednn"  # the embedded model's default
LINEAR_KERNELS = (LINEAR_KERNEL, "torch")
# products of fewer multiply-adds (M K N) stay on F.linear: oneDNN's per-call cost (~20 us on a cache
# hit) is more than MKL's whole product there (the sampler's decode steps, the shared-prompt heads)
ONEDNN_MIN_MACS = 1 << 20
X86_64 = ("x86_64", "amd64")  # platform.machine() of an x86-64 CPU (Linux, Windows)


def onednn_available() -> bool:
    """Whether this process runs the linear layers on oneDNN: an x86-64 CPU (where oneDNN's kernels were
    measured; on ARM, e.g. an Apple-silicon laptop, its float32 linear was not) and a torch with
    oneDNN's fused linear op."""
    return (platform.machine().lower() in X86_64 and torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_linear_pointwise"))


def onednn_linear(x2: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """x2 [M, K], weight [N, K], bias [N] or None -> x2 weight^T + bias [M, N] (oneDNN, float32)."""
    return torch.ops.mkldnn._linear_pointwise(x2, weight, bias, "none", [], "")  # [M, N]


def padded_rows(m: int) -> int:
    """The row count M' >= m that oneDNN runs: m rounded up to a multiple of q = 2^(bits(m) - 4),
    at least 16, so M' - m < q <= max(16, m / 8) (at most 12.5% more rows from 128 rows on), and all
    row counts fall on ~8 sizes per octave. oneDNN builds (and JIT-compiles) a primitive for each shape
    it sees and caches it; the trainer's batches give a new row count at almost every call, and a
    cache miss cost 0.15-2 ms against a 0.02-0.6 ms product (1 thread), more than the kernel wins."""
    q = max(16, 1 << max(0, m.bit_length() - 4))
    return -(-m // q) * q


def _pad_rows(t: torch.Tensor, rows: int) -> torch.Tensor:
    """t [m, C] followed by rows - m rows of zeros: [rows, C] (t itself when rows == m)."""
    if rows == t.shape[0]:
        return t.contiguous()
    out = t.new_empty(rows, t.shape[1])  # [rows, C]
    out[: t.shape[0]].copy_(t)
    out[t.shape[0]:].zero_()
    return out


def _padded_rows_of(x: torch.Tensor) -> tuple[torch.Tensor, int]:
    """(x's rows [M, K] padded with zeros to [padded_rows(M), K], M) for x [..., K]."""
    x2 = x.reshape(-1, x.shape[-1])  # [M, K]
    return _pad_rows(x2, padded_rows(x2.shape[0])), x2.shape[0]  # [M', K], M


def _product_of_padded(x: torch.Tensor, x2p: torch.Tensor, m: int, weight: torch.Tensor,
                       bias: torch.Tensor | None) -> torch.Tensor:
    """y = x W^T + b [..., N] from x's padded rows x2p [M', K] (the first m real): the padded rows'
    outputs are sliced off."""
    y2 = onednn_linear(x2p, weight, bias)[:m]  # [M, N]
    return y2.reshape(*x.shape[:-1], weight.shape[0])  # [..., N]


class OneDnnLinearFunction(torch.autograd.Function):
    """y = x W^T + b with its three matmuls on oneDNN, over rows padded with zeros to padded_rows
    (module docstring). A zero row of x gives a row of y that is sliced off, a zero row of dy a row
    of dx that is sliced off, and adds exactly 0 to dW = dy^T x."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        x2p, m = _padded_rows_of(x)  # [M', K]
        ctx.save_for_backward(x2p, weight)
        ctx.has_bias, ctx.rows = bias is not None, m
        return _product_of_padded(x, x2p, m, weight, bias)  # [..., N]

    @staticmethod
    def backward(ctx, grad_y):
        x2p, weight = ctx.saved_tensors  # [M', K], [N, K]
        m = ctx.rows
        g2 = grad_y.reshape(-1, grad_y.shape[-1])  # [M, N]
        g2p = _pad_rows(g2, x2p.shape[0])  # [M', N]
        grad_x = grad_w = grad_b = None
        if ctx.needs_input_grad[0]:
            # dx = dy W = dy (W^T)^T: a linear with weight W^T [K, N]
            grad_x = onednn_linear(g2p, weight.t().contiguous(), None)[:m]  # [M, K]
            grad_x = grad_x.reshape(*grad_y.shape[:-1], weight.shape[1])  # [..., K]
        if ctx.needs_input_grad[1]:
            # dW = dy^T x = dy^T (x^T)^T: a linear of dy^T [N, M'] with weight x^T [K, M']
            grad_w = onednn_linear(g2p.t(), x2p.t(), None)  # [N, K]
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = g2.sum(dim=0)  # [N]: db = sum_m dy[m]
        return grad_x, grad_w, grad_b


def runs_on_onednn(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """OneDnnLinear's rule: a CPU float32 product of at least ONEDNN_MIN_MACS multiply-adds."""
    return (x.device.type == "cpu" and x.dtype == torch.float32 and weight.dtype == torch.float32
            and x.numel() * weight.shape[0] >= ONEDNN_MIN_MACS)


def inference_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, *,
                     onednn: bool = True) -> torch.Tensor:
    """y = x W^T + b [..., N] for x [..., K], weight [N, K], with no autograd record: on oneDNN over
    padded rows (the forward of OneDnnLinearFunction, bit for bit) when `onednn` and runs_on_onednn,
    else F.linear. The sampler's packed layers and OneDnnLinear outside autograd call it."""
    if not (onednn and runs_on_onednn(x, weight)):
        return F.linear(x, weight, bias)
    x2p, m = _padded_rows_of(x)  # [M', K]
    return _product_of_padded(x, x2p, m, weight, bias)  # [..., N]


class OneDnnLinear(torch.nn.Linear):
    """nn.Linear whose forward runs on oneDNN where it can (module docstring); outside autograd (no
    gradient wanted) without the autograd function's own cost."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w, b = self.weight, self.bias
        if not runs_on_onednn(x, w):
            return F.linear(x, w, b)
        if torch.is_grad_enabled() and (x.requires_grad or w.requires_grad or (b is not None and b.requires_grad)):
            return OneDnnLinearFunction.apply(x, w, b)  # [..., N]
        return inference_linear(x, w, b)  # [..., N]


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
