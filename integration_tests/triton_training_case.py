"""A GPT-2 style block (or, with ``llama`` after OUT.json, a LLaMA-style one: RMSNorm,
grouped-query attention, SwiGLU) trained one step through danlu-aotautograd with
danlu-inductor's Triton backend compiling forward and backward; run in a child process by
test_inductor_triton.py with CPU tensors under the Triton interpreter
(DANLU_INDUCTOR_TRITON_ON_CPU=1 TRITON_INTERPRET=1) and every kernel compiled ahead of time
for sm_90 (DANLU_INDUCTOR_TRITON_CHECK_TARGET=90). Writes what it checked to OUT.json.
"""

from __future__ import annotations

import copy
import json
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, dim=32, heads=2, ctx=16):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim)
        self.out = nn.Linear(4 * dim, dim)
        self.register_buffer("mask", torch.ones(ctx, ctx, dtype=torch.bool).tril())

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5
        att = att.masked_fill(~self.mask[:t, :t], float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))


class LlamaBlock(nn.Module):
    """RMSNorm, attention with 4 query heads over 2 key/value heads (the gradients of the
    shared heads sum over their 2 repeats: a reduction over rows of 2), SwiGLU."""

    def __init__(self, dim=32, heads=4, kv_heads=2, hidden=48):
        super().__init__()
        self.heads, self.kv_heads, self.hd = heads, kv_heads, dim // heads
        self.norm1 = nn.Parameter(torch.rand(dim) + 0.5)
        self.norm2 = nn.Parameter(torch.rand(dim) + 0.5)
        self.q = nn.Linear(dim, dim, bias=False)
        self.kv = nn.Linear(dim, 2 * kv_heads * self.hd, bias=False)
        self.o = nn.Linear(dim, dim, bias=False)
        self.gate = nn.Linear(dim, hidden, bias=False)
        self.up = nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    @staticmethod
    def rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    def forward(self, x):
        b, t, c = x.shape
        h = self.rms(x, self.norm1)
        q = self.q(h).view(b, t, self.heads, self.hd).transpose(1, 2)
        k, v = self.kv(h).view(b, t, 2, self.kv_heads, self.hd).permute(2, 0, 3, 1, 4)
        rep = self.heads // self.kv_heads
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) * self.hd**-0.5
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        x = x + self.o((att @ v).transpose(1, 2).reshape(b, t, c))
        h = self.rms(x, self.norm2)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


def main(out_path, block="gpt2"):
    import danlu_aotautograd as aot
    from danlu_inductor import compile_fx

    reports = []

    def compiler(gm, example_inputs):
        compiled = compile_fx(gm, example_inputs)
        reports.append(compiled.report)
        return compiled

    torch.manual_seed(0)
    model = LlamaBlock() if block == "llama" else Block()
    ref64 = copy.deepcopy(model).double()
    # a non-contiguous input: the block sees (batch, seq, dim) through a transpose
    x = torch.randn(16, 2, 32).transpose(0, 1)
    compiled = aot.aot_module(model, compiler, compiler, decompositions="canonical")
    loss = compiled(x).pow(2).mean()
    loss.backward()
    loss64 = ref64(x.double()).pow(2).mean()
    loss64.backward()

    def rel(a, b):
        return float((a.double() - b).norm() / b.norm())

    errors = {"loss": rel(loss.detach(), loss64.detach())}
    for (name, p), p64 in zip(model.named_parameters(), ref64.parameters()):
        errors[name] = rel(p.grad, p64.grad)
    aot_checked = []
    for r in reports:
        aot_checked.append(
            {
                "backend": r.get("backend"),
                "kernels": r.get("kernels"),
                "triton_fallbacks": r.get("triton_fallbacks"),
                "fallback_reason": r.get("fallback_reason"),
            }
        )
    with open(out_path, "w") as f:
        json.dump({"errors": errors, "graphs": aot_checked}, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:3])
