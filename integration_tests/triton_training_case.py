"""A GPT-2 style block trained one step through danlu-aotautograd with danlu-inductor's
Triton backend compiling forward and backward; run in a child process by
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


def main(out_path):
    import danlu_aotautograd as aot
    from danlu_inductor import compile_fx

    reports = []

    def compiler(gm, example_inputs):
        compiled = compile_fx(gm, example_inputs)
        reports.append(compiled.report)
        return compiled

    torch.manual_seed(0)
    model = Block()
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
    main(sys.argv[1])
