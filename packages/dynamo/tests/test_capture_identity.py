"""Containers that come from the frame state stay the same objects across a graph break, so
mutations made by code that runs eagerly after the break reach the caller's objects."""

import torch

import danlu_dynamo


def test_list_append_after_a_break_reaches_the_callers_list():
    seen = []

    def f(x):
        h = torch.relu(x)
        seen.append(float(h.sum()))  # float() of a tensor breaks the graph mid-expression
        return h * 2

    compiled = danlu_dynamo.optimize("eager")(f)
    for _ in range(3):
        x = torch.randn(5)
        torch.testing.assert_close(compiled(x), f(x), rtol=0, atol=0)
    assert len(seen) == 6  # three eager calls, three compiled ones


def test_dict_update_after_a_break_reaches_the_callers_dict():
    stats = {}

    def f(x, stats):
        h = x.sin()
        stats[len(stats)] = h.max().item()
        return h + 1

    compiled = danlu_dynamo.optimize("eager")(f)
    x = torch.randn(4)
    ref_stats = {}
    torch.testing.assert_close(compiled(x, stats), f(x, ref_stats), rtol=0, atol=0)
    assert stats == ref_stats and len(stats) == 1


def test_list_passed_in_is_returned_as_itself():
    def f(x, items):
        items.append(x.cos())
        return items

    compiled = danlu_dynamo.optimize("eager")(f)
    items = [torch.zeros(2)]
    out = compiled(torch.randn(2), items)
    assert out is items and len(items) == 2
