"""The policy model every backend, BC and evaluation share: a Qwen3 causal LM built from a config.

`build_model` makes a fresh, seeded Qwen3ForCausalLM of a named size (no download);
`load_model` loads any local HF checkpoint (model + tokenizer), so a user with Qwen3 weights
on disk can train them with the same code; `save_checkpoint` writes both atomically.

Attention: "sdpa_gqa" (attention.py: SDPA reading the grouped key/value heads itself, logits
bit-identical to "sdpa", gradients equal up to float rounding) is the default; HF's "sdpa" and
"eager" are also accepted. Measured on the 2-core CPU box before "sdpa_gqa"
(torch 2.13, transformers 5.10, 1 thread, CPU time, median of 5), a 64 x 96-token batch:
"tiny" forward 75 ms (sdpa) vs 82 ms (eager), forward+backward 249 vs 250 ms; "small"
forward 214 vs 269 ms, forward+backward 842 vs 899 ms. The sampler's fast path always uses
`F.scaled_dot_product_attention` itself (see decoding.py).

Linear layers: "onednn" (linear_kernel.py: every projection's matmuls on oneDNN, equal to torch's
up to float rounding, 2-2.5x MKL's float32 rate on the CI kind of machine) is the default; "torch"
(plain nn.Linear) is also accepted. Like the attention's name, it lives in the loaded model only.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, Qwen3Config, Qwen3ForCausalLM

from arena.io.atomic import atomic_write_dir

from .attention import ATTENTION
from .linear_kernel import LINEAR_KERNEL, set_linear_kernel

# Named sizes. Parameter counts are for vocab_size=1024 with tied embeddings.
SIZES = {
    "tiny": dict(hidden=64, layers=2, heads=4, kv_heads=2, intermediate=192),  # ~0.15M
    "small": dict(hidden=128, layers=4, heads=4, kv_heads=2, intermediate=256),  # ~0.72M
    "medium": dict(hidden=256, layers=6, heads=8, kv_heads=4, intermediate=768),  # ~5.0M
}
ATTN_IMPLEMENTATIONS = (ATTENTION, "sdpa", "eager")


def build_model(
    vocab_size: int,
    *,
    size: str = "small",
    hidden: int | None = None,
    layers: int | None = None,
    heads: int | None = None,
    kv_heads: int | None = None,
    intermediate: int | None = None,
    max_positions: int = 4096,
    seed: int = 0,
    attn_implementation: str = ATTENTION,
    pad_token_id: int | None = None,
    eos_token_id: int | None = None,
    tie_word_embeddings: bool = True,
    rope_theta: float = 10000.0,
    linear_kernel: str = LINEAR_KERNEL,
) -> Qwen3ForCausalLM:
    """A fresh fp32 Qwen3ForCausalLM. `size` picks the defaults; any explicit dimension
    overrides it. The weights depend only on the config and `seed` (the global RNG is left
    untouched)."""
    if size not in SIZES:
        raise ValueError(f"unknown model size {size!r}; valid sizes: {', '.join(SIZES)}")
    if attn_implementation not in ATTN_IMPLEMENTATIONS:
        raise ValueError(
            f"unknown attn_implementation {attn_implementation!r}; valid: {', '.join(ATTN_IMPLEMENTATIONS)}"
        )
    dims = dict(SIZES[size])
    explicit = dict(hidden=hidden, layers=layers, heads=heads, kv_heads=kv_heads, intermediate=intermediate)
    dims.update({name: value for name, value in explicit.items() if value is not None})
    if dims["hidden"] % dims["heads"] or dims["heads"] % dims["kv_heads"]:
        raise ValueError(f"need hidden % heads == 0 and heads % kv_heads == 0, got {dims}")
    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=dims["hidden"],
        intermediate_size=dims["intermediate"],
        num_hidden_layers=dims["layers"],
        num_attention_heads=dims["heads"],
        num_key_value_heads=dims["kv_heads"],
        head_dim=dims["hidden"] // dims["heads"],
        max_position_embeddings=max_positions,
        rope_parameters={"rope_type": "default", "rope_theta": rope_theta},
        tie_word_embeddings=tie_word_embeddings,
        pad_token_id=pad_token_id,
        eos_token_id=eos_token_id,
        bos_token_id=None,
    )
    config._attn_implementation = attn_implementation
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen3ForCausalLM(config)
    return set_linear_kernel(model.float().eval(), linear_kernel)


def count_parameters(model: torch.nn.Module) -> int:
    """Distinct parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in model.parameters())


def resolve_device(device: str | torch.device = "cpu") -> torch.device:
    """"cpu" by default; "cuda" when asked for and available (else ValueError)."""
    asked = str(device)
    try:
        device = torch.device(device)
    except RuntimeError:
        device = None
    if device is None or device.type not in ("cpu", "cuda"):
        raise ValueError(f"unknown device {asked!r}; valid devices: cpu, cuda")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' was asked for but CUDA is not available; valid devices here: cpu")
    return device


def load_model(path: str | os.PathLike, *, device: str = "cpu", attn_implementation: str = ATTENTION,
               linear_kernel: str = LINEAR_KERNEL):
    """(model, tokenizer) from a local HF checkpoint folder; nothing is downloaded. A run folder
    means its final policy (arena.runs.policy.policy_folder; NoPolicy when it has none)."""
    # lazy: keeps omegaconf out of this module's import
    from arena.runs.policy import policy_folder

    path = policy_folder(path)
    if not (path / "config.json").is_file():
        raise ValueError(f"no HF checkpoint at {str(path)!r}: expected a folder with config.json")
    model = AutoModelForCausalLM.from_pretrained(
        path, local_files_only=True, dtype=torch.float32, attn_implementation=attn_implementation
    )
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return set_linear_kernel(model.to(resolve_device(device)).eval(), linear_kernel), tokenizer


def save_checkpoint(model, tokenizer, path: str | os.PathLike) -> Path:
    """Write model + tokenizer to `path` atomically (arena.io.atomic.atomic_write_dir: a temp
    folder beside it with the modes a plain mkdir/open would give, so a lab's shared BC cache is
    readable, fsynced, then renamed). An existing checkpoint at `path` is replaced."""
    def fill(folder: Path) -> None:
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    return atomic_write_dir(path, fill)
