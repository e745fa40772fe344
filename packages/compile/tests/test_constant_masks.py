"""A mask rebuilt from sizes with slice writes on every call (shifted-window attention's) is
folded into a constant by inductor once aotautograd has made the writes functional; values
match eager on every call, in training too."""

import logging

import torch

import danlu


def shifted_window_scores(x, w):
    n = x.shape[1]
    mask = x.new_zeros(n, n)
    count = 0
    for a, b in ((0, n - 4), (n - 4, n - 2), (n - 2, None)):
        for c, d in ((0, n - 3), (n - 3, None)):
            mask[a:b, c:d] = count
            count += 1
    mask = (mask.unsqueeze(0) - mask.unsqueeze(1)).sum(0).ne(0)
    scores = (x @ w) @ x.transpose(-1, -2)
    return scores.masked_fill(mask, -100.0).softmax(-1)


def test_mask_is_folded_and_matches_eager(caplog):
    danlu.reset()
    compiled = danlu.compile(shifted_window_scores)
    with caplog.at_level(logging.INFO, logger="danlu_inductor"):
        for _ in range(3):
            x = torch.randn(2, 9, 5, requires_grad=True)
            w = torch.randn(5, 5, requires_grad=True)
            out = compiled(x, w)
            ref = shifted_window_scores(x, w)
            torch.testing.assert_close(out, ref)
            g = torch.randn_like(ref)
            got = torch.autograd.grad(out, (x, w), g)
            exp = torch.autograd.grad(ref, (x, w), g)
            for a, b in zip(got, exp):
                torch.testing.assert_close(a, b)
    assert "folded" in caplog.text
    assert len(danlu.CompileStats.current().graphs) == 1
