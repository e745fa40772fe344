"""Index tensors are often expanded or strided views (e.g. position ids): decompositions that
flatten them must not assume a view is possible."""

import torch

from danlu_primtorch import decomposition_table

aten = torch.ops.aten


def _strided_indices(n, shape):
    base = torch.randint(0, n, (1, shape[1]))
    return {
        "expanded": base.expand(*shape),
        "transposed": torch.randint(0, n, (shape[1], shape[0])).t(),
    }


def test_embedding_and_backward_with_strided_indices():
    table = decomposition_table("canonical")
    torch.manual_seed(0)
    w = torch.randn(11, 5)
    for name, idx in _strided_indices(11, (3, 4)).items():
        assert not idx.is_contiguous(), name
        ref = aten.embedding.default(w, idx)
        out = table[aten.embedding.default](w, idx)
        torch.testing.assert_close(out, ref, rtol=0, atol=0, msg=name)
        g = torch.randn(*idx.shape, 5)
        ref_g = aten.embedding_dense_backward.default(g, idx, 11, -1, False)
        out_g = table[aten.embedding_dense_backward.default](g, idx, 11, -1, False)
        torch.testing.assert_close(out_g, ref_g, msg=name)


def test_index_fill_with_strided_index():
    table = decomposition_table("canonical")
    x = torch.randn(6, 4)
    idx = torch.tensor([[0, 2, 5]]).expand(2, 3)[0]
    idx2 = torch.tensor([0, 2, 5, 1])[::2]
    for index in (idx, idx2):
        ref = aten.index_fill.int_Scalar(x, 0, index, -1.5)
        out = table[aten.index_fill.int_Scalar](x, 0, index, -1.5)
        torch.testing.assert_close(out, ref, rtol=0, atol=0)


def test_layer_norm_of_a_permuted_input_is_contiguous_like_aten():
    # ConvNeXt normalises NHWC views of NCHW tensors; ATen's result is contiguous, and the
    # matmul after it folds into one mm only when ours is too
    table = decomposition_table("canonical")
    torch.manual_seed(1)
    x = torch.randn(3, 6, 5, 4).permute(0, 2, 3, 1)
    w, b = torch.randn(6), torch.randn(6)
    ref = aten.native_layer_norm.default(x, [6], w, b, 1e-5)
    out = table[aten.native_layer_norm.default](x, [6], w, b, 1e-5)
    for o, r in zip(out, ref):
        torch.testing.assert_close(o, r, rtol=1e-5, atol=1e-5)
        assert o.stride() == r.stride()
