"""Einsum forms that are a matmul, a transpose, a sum or a product (issue 21), end to end
against onnxruntime: the frontend rewrites them to `permute_dims` / `matmul` / `sum` /
`multiply` (`mrvl_ir/einsum.py`), so attention written as Einsum (Q·Kᵀ, A·V, with or without
an ellipsis) runs on the MLIP as `MatMul` does; a diagonal is a strided copy, a broadcast an
expansion; other forms keep TVM's conversion and run on the CPU, exactly."""

from __future__ import annotations

import numpy as np
import pytest
from e2e.test_shapes_end_to_end import check_offloaded_and_accurate, const, model
from helpers import onnxruntime_outputs
from onnx import helper

import mrvl

SIZES = {"b": 2, "h": 2, "i": 5, "j": 6, "d": 8, "k": 7, "n": 1, "c": 3, "w": 4}


def einsum_net(equation: str, constant_second: bool = False):
    """Einsum of graph inputs (or of an input and a constant), each of the sizes SIZES gives
    its letters."""
    inputs, arrow, output = equation.partition("->")
    terms = inputs.split(",")
    if not arrow:
        letters = "".join(terms)
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    shape = lambda t: [SIZES[c] for c in t]  # noqa: E731
    names = [f"x{i}" for i in range(len(terms))]
    inits = []
    if constant_second:
        inits.append(const(np.random.default_rng(5), "x1", shape(terms[1])))
    feeds = [(n, shape(t)) for n, t in zip(names, terms) if n not in {i.name for i in inits}]
    node = helper.make_node("Einsum", names, ["y"], name="einsum", equation=equation)
    return model([node], inits, feeds, [("y", shape(output))], opset=12)


def shaped_einsum_net(equation: str, shapes: list[list[int]], out_shape: list[int]):
    """Einsum of graph inputs of the given shapes (an equation with an ellipsis)."""
    names = [f"x{i}" for i in range(len(shapes))]
    node = helper.make_node("Einsum", names, ["y"], name="einsum", equation=equation)
    return model([node], [], list(zip(names, shapes)), [("y", out_shape)], opset=12)


@pytest.mark.parametrize(
    "equation, constant_second",
    [
        ("bhid,bhjd->bhij", False),  # Q·Kᵀ: a transposed operand
        ("bhij,bhjd->bhid", False),  # A·V
        ("bij,bjk->bik", False),  # batched matmul
        ("bid,bjd->bji", False),  # a transposed result
        ("ij,jk", False),  # the implicit output
        ("bij,bjk", False),  # implicit, two summed letters (b, j) merged into one
        ("bij,jk->bik", True),  # an fc by a constant
        ("bik,jk->bij", True),  # an fc by a transposed constant (nn.Linear's weight)
        ("nchw->nhwc", False),  # a transpose
        ("bij->bi", False),  # a sum within the one operand
        ("bij->jb", False),  # a sum, then a transpose
        ("ij,jk->k", False),  # a letter (i) summed within the first operand, then a matmul
        ("ij,ij->ij", False),  # an elementwise product
        ("bhi,bhi->hbi", False),  # a product in another order
    ],
)
def test_einsum_as_matmul_or_transpose_runs_on_the_mlip(equation, constant_second):
    check_offloaded_and_accurate(einsum_net(equation, constant_second), num_tiles=1)


@pytest.mark.parametrize(
    "equation, shapes, out_shape",
    [
        ("...ij,...jk->...ik", [[2, 2, 5, 6], [2, 2, 6, 7]], [2, 2, 5, 7]),  # PyTorch's A·V
        ("...id,...jd->...ij", [[2, 5, 8], [2, 6, 8]], [2, 5, 6]),  # Q·Kᵀ
        ("...ij,jk", [[2, 5, 6], [6, 7]], [2, 5, 7]),  # implicit: the ellipsis first
        ("b...->...b", [[2, 3, 4]], [3, 4, 2]),  # a transpose
    ],
)
def test_einsum_with_an_ellipsis_runs_on_the_mlip(equation, shapes, out_shape):
    check_offloaded_and_accurate(shaped_einsum_net(equation, shapes, out_shape), num_tiles=1)


@pytest.mark.parametrize(
    "equation, shapes, out_shape",
    [
        ("bii->bi", [[2, 4, 4]], [2, 4]),  # a batch of diagonals
        ("nchh->nch", [[1, 3, 4, 4]], [1, 3, 4]),  # the two axes last
        ("nhch->nch", [[1, 4, 3, 4]], [1, 3, 4]),  # apart: permuted first
        ("bii->b", [[2, 4, 4]], [2]),  # a trace: the diagonal, then a sum
        ("bij,bjj->bi", [[2, 3, 4], [2, 4, 4]], [2, 3]),  # a diagonal, then a matmul
        ("...ij,...jk->...ik", [[2, 1, 5, 6], [2, 3, 6, 7]], [2, 3, 5, 7]),  # a broadcast
        ("...ij,...jk->...ik", [[3, 5, 6], [1, 6, 7]], [3, 5, 7]),  # the other way round
    ],
)
def test_einsum_with_a_diagonal_or_a_broadcast_runs_on_the_mlip(equation, shapes, out_shape):
    """A letter twice in one operand: a strided copy of the diagonal (permute, reshape, every
    (n+1)-th element); an ellipsis axis of size 1 against n: the operand expanded (a copy of
    stride 0); then the rest of the equation as above."""
    check_offloaded_and_accurate(shaped_einsum_net(equation, shapes, out_shape), num_tiles=1)


@pytest.mark.parametrize(
    "equation, shapes, out_shape",
    [
        ("iii->i", [[3, 3, 3]], [3]),  # a letter three times: TVM's relax.einsum
        ("ii->i", [[5, 5]], [5]),  # a diagonal of rank 1: the copy's result rank
    ],
)
def test_other_einsum_forms_keep_tvms_conversion(equation, shapes, out_shape):
    """A letter three times: TVM's relax.einsum; a diagonal of rank 1, the rewritten reshape
    and strided slice: on the CPU, exactly."""
    import tvm
    from tvm import relax

    onnx_model = shaped_einsum_net(equation, shapes, out_shape)
    feeds = {
        i.name: np.random.default_rng(1)
        .standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim])
        .astype(np.float32)
        for i in onnx_model.graph.input
    }
    mod = mrvl.partition_for_mrvl(mrvl.from_onnx(onnx_model))
    assert {row.target for row in mrvl.partition_report(mod).rows} == {"cpu"}
    vm = relax.VirtualMachine(mrvl.build(mod), tvm.cpu())
    got = vm["main"](*[tvm.runtime.tensor(v) for v in feeds.values()]).numpy()
    np.testing.assert_allclose(got, onnxruntime_outputs(onnx_model, feeds)[0], rtol=1e-5, atol=1e-6)


def test_a_rewrite_that_fails_part_way_binds_nothing():
    """`bii,jj->bij` with a constant second operand: the first diagonal could be taken, the
    constant's cannot (TVM's conversion folds constants), so the whole Einsum keeps TVM's
    conversion, and no strided copy of the first diagonal is left unread in the module."""
    from onnx import numpy_helper

    onnx_model = shaped_einsum_net("bii,jj->bij", [[2, 4, 4]], [2, 4, 3])
    onnx_model.graph.initializer.append(
        numpy_helper.from_array(np.arange(9, dtype=np.float32).reshape(3, 3), "x1")
    )
    onnx_model.graph.node[0].input.append("x1")
    text = mrvl.from_onnx(onnx_model)["main"].script()
    assert "einsum" in text and "strided_slice" not in text
