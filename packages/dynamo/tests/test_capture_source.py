"""Source expressions: an expression whose interned source was collected is split back into
parent and suffix from its text, so guards and runners can still share the parent's read."""

import collections

import torch

from danlu_dynamo.capture.source import fast_suffix, local_source, lookup


def _split(expr):
    s = lookup(expr)
    return None if s is None or s.parent is None else (s.parent.expr, s.suffix)


def test_text_split_of_attribute_and_constant_item_reads():
    assert _split("L['self'].model.config") == ("L['self'].model", ".config")
    assert _split("L['a'][0]") == ("L['a']", "[0]")
    assert _split("G['x'].y['k.z']") == ("G['x'].y", "['k.z']")
    assert _split("getattr(type(L['m']).forward, '__closure__')[0].cell_contents") == (
        "getattr(type(L['m']).forward, '__closure__')[0]",
        ".cell_contents",
    )
    assert _split("L['it]s'].x") == ("L['it]s']", ".x")  # a bracket inside a key
    # a static class lookup reads its class from the shared parent, not the whole chain
    static = "inspect.getattr_static(type(L['self'].a.b), '_bucket')"
    assert _split(static) == ("type(L['self'].a.b)", ", '_bucket')")
    assert lookup(static).prefix == "inspect.getattr_static("
    assert _split("type(L['self'].a.b)") == ("L['self'].a.b", ")")


def test_a_cells_contents_are_read_whole():
    # the frame hook passes closure cells' contents by name: C[i].cell_contents is one read
    assert _split("C[0].cell_contents") is None
    assert _split("K['x'].cell_contents") is None
    assert _split("C[0].cell_contents.weight") == ("C[0].cell_contents", ".weight")


def test_roots_and_malformed_text_have_no_parent():
    assert _split("L['self']") is None  # the root: L is a bare name
    assert _split("(a].b") is None  # brackets that do not pair up
    assert _split("L['x'] + 1") is None


def test_interned_sources_keep_their_parent():
    root = local_source("net")
    child = root.attr("layer").item(2)
    assert lookup(child.expr) is child and child.parent.parent is root


def test_module_list_items_are_read_from_the_dict_only_for_plain_module_lists():
    blocks = torch.nn.ModuleList(torch.nn.Identity() for _ in range(3))
    assert fast_suffix(blocks, "[2]") == "._modules['2']"
    assert fast_suffix(blocks, "[-1]") == "[-1]"  # negative: ModuleList's own arithmetic
    assert fast_suffix(blocks, "[5]") == "[5]"

    class Custom(torch.nn.ModuleList):
        def __getitem__(self, i):
            return super().__getitem__(len(self) - 1 - i)

    assert fast_suffix(Custom(torch.nn.Identity() for _ in range(2)), "[0]") == "[0]"
    seq = torch.nn.Sequential(torch.nn.Identity(), torch.nn.Identity())
    assert fast_suffix(seq, "[1]") == "._modules['1']"  # positional: keys "0", "1", ...
    named = torch.nn.Sequential(
        collections.OrderedDict(a=torch.nn.Identity(), b=torch.nn.Identity())
    )
    assert fast_suffix(named, "[0]") == "[0]"  # keys are names: the index is Sequential's
