"""The `mrvl.*` patterns: which Relax subgraphs become MLIP layers, by composite name.

The pattern table says what the MLIP compiler accepts; each pattern's check rejects what the
compiler's Relax importer would not handle, so that an unsupported op stays on the host
instead of failing the build. The composite names and what each composite may contain are a
contract with `relax_import.py`:

    mrvl.conv2d            [pad] conv2d|conv1d [[+bias] batch_norm] [steps] [activation]
                           (a conv1d is a conv2d over H = 1)
    mrvl.conv_transpose    conv2d_transpose|conv1d_transpose [+bias] [activation] (zero
                           insertion + conv2d; a conv1d_transpose over H = 1)
    mrvl.resize            resize2d, linear (bilinear) or a nearest that is no strided copy
    mrvl.fc                [*alpha] matmul [steps] [activation], rows [N, K] or [..., K] at
                           rank 3 to 5 (a sequence, a channels-last plane or window)
    mrvl.bmm               matmul of two activations, either one through a permute_dims of
                           its last two axes (`matmul.py`)
    mrvl.add               add(a, b) of two same-shape tensors [activation]
    mrvl.mul               multiply(a, b) of two same-shape tensors, or of x and a gate
                           [N, C, 1, 1] (either side) [activation]
    mrvl.scale_shift       x steps [activation] | activation(x)
    mrvl.maxpool2d, mrvl.avgpool2d, mrvl.global_avgpool2d (mean), mrvl.global_maxpool2d (max)
    mrvl.concat            concat on any axis, ranks 2 to 4
    mrvl.quantize, mrvl.dequantize   relax.quantize / relax.dequantize of an activation, per
                           tensor, int8 or uint8 (qdq_layers.py)
    mrvl.reshape           reshape / squeeze / flatten between rank 4 and rank 2
    mrvl.transpose         permute_dims NCHW <-> NHWC
    mrvl.softmax           softmax on any axis, or reshape(softmax(reshape(x))) of an opset <= 12
                           export (normalization.py)
    mrvl.layernorm         layer_norm over the trailing axes, or its decomposed form
                           (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div [, Mul] [, Add])
    mrvl.pad               a constant pad that no conv took (padding.py)
    mrvl.reduce            sum / mean / max / min / argmax / l2 over consecutive axes (reductions.py)
    mrvl.binary            add / sub / mul / div / max / min of two tensors that broadcast
                           (reductions.py), after every other pattern
    mrvl.copy              a chain of 1 to 3 data-movement ops (reshape, squeeze, expand_dims,
                           flatten, permute_dims, strided_slice, nearest resize2d, take with
                           constant indices, broadcast_to) that is a strided copy (`strided.py`): slices
                           (any step), split outputs, transposes, channel shuffles, integer
                           nearest upsampling, Gather, Expand (broadcast_to)
    steps                  up to 3 of +c, -c, c-, *c, /c, with c per channel or scalar, on
                           either side where the op commutes (folded into scale and shift)
    activation             relu | clip(min, max) | leakyrelu | prelu | sigmoid | tanh |
                           SiLU, HardSwish and Mish as TVM writes them | erf | exp | log |
                           sqrt | abs | gelu | gelu_tanh | power(x, c) | 1 / x | GELU written
                           out (erf and tanh forms) | a clip of a relu or a clip
                           (activation_forms.py)

Optional trailing parts are alternatives inside one pattern: FuseOpsByPattern grows a match
binding by binding, so a trailing part that fails its check is simply left out. An optional
*leading* part (the pad before a conv, Gemm's alpha before a matmul) cannot be left out that
way, so those layers are registered twice under the same composite name, with the leading
part first: a conv whose pad is unsupported is still offloaded, without its pad.

Each pattern's check is in `pattern_checks.py`. Importing this module registers the table
with TVM's pattern registry under the prefix `mrvl.`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from tvm.relax.backend.pattern_registry import get_patterns_with_prefix, register_patterns
from tvm.relax.dpl import DFPattern, is_const, is_op, is_tuple_get_item, wildcard

from . import strided
from .activation_forms import UNARY_TABLES
from .conv_transpose import check_conv_transpose
from .matmul import bmm_patterns
from .move_checks import check_copy, check_reshape, check_transpose
from .normalization import decomposed_layernorm_pattern, layernorm_pattern, softmax_pattern
from .padding import pad_pattern
from .pattern_checks import (
    MAX_AFFINE_STEPS,
    check_add,
    check_concat,
    check_conv2d,
    check_fc,
    check_global_pool2d,
    check_mul,
    check_pool2d,
    check_resize,
    check_scale_shift,
    checked,
    current_collector,
)
from .qdq_constants import constant_quant_attrs
from .qdq_layers import quant_patterns, weight_scale_attrs
from .reductions import (
    BINARY_OPS,
    REDUCE_OPS,
    binary_pattern,
    reduce_l2_pattern,
    reduce_pattern,
)

CODEGEN = "mrvl"
"""The codegen the regions are annotated for; every pattern name starts with `mrvl.`."""

LAYER_OPS = frozenset(
    {
        "relax.nn.pad", "relax.nn.conv2d", "relax.add", "relax.multiply", "relax.nn.batch_norm",
        "relax.nn.relu", "relax.clip", "relax.nn.leakyrelu", "relax.matmul",
        "relax.nn.max_pool2d", "relax.nn.avg_pool2d", "relax.mean", "relax.max", "relax.concat",
        "relax.reshape", "relax.squeeze", "relax.flatten", "relax.permute_dims",
        "relax.subtract", "relax.divide", "relax.sigmoid", "relax.tanh", "relax.nn.prelu",
        "relax.exp", "relax.log",
        "relax.expand_dims", "relax.strided_slice", "relax.image.resize2d",
        "relax.nn.conv2d_transpose", "relax.nn.conv1d_transpose", "relax.power",
        *UNARY_TABLES, "relax.take",
        "relax.broadcast_to", "relax.nn.conv1d", "relax.nn.softmax", "relax.nn.layer_norm",
        "relax.sqrt", "relax.quantize", "relax.dequantize", *REDUCE_OPS, *BINARY_OPS,
    }
)  # fmt: skip
"""Every Relax op some pattern contains; a node with any other op cannot be offloaded."""


def _gelu_forms(x: DFPattern) -> list[DFPattern]:
    """GELU written out, in its Erf and tanh forms and the orders exporters write."""

    def mul(a, b):
        return is_op("relax.multiply")(a, b)

    def add(a, b):
        return is_op("relax.add")(a, b)

    erf = is_op("relax.erf")(is_op("relax.divide")(x, is_const()) | mul(x, is_const()))
    cube = is_op("relax.power")(x, is_const()) | mul(mul(x, x), x)
    tanh = is_op("relax.tanh")(
        mul(add(x, mul(cube, is_const())), is_const())
        | add(mul(x, is_const()), mul(cube, is_const()))
    )
    forms = []
    for g in (erf, tanh):
        one_plus = add(g, is_const())
        forms += [
            mul(mul(x, one_plus), is_const()),
            mul(mul(x, is_const()), one_plus),
            mul(x, mul(one_plus, is_const())),
            is_op("relax.divide")(mul(x, one_plus), is_const()),
        ]
    return forms


def _activations(x: DFPattern) -> DFPattern:
    """Every activation form `split_activation` reads, applied to x (the longest forms of a
    root first: an OrPattern takes the first alternative that matches)."""
    relu6 = [
        is_op("relax.clip")(is_op("relax.add")(x, is_const()), wildcard(), wildcard())
        for _ in range(2)
    ]
    hard_sigmoid = is_op("relax.clip")(
        is_op("relax.add")(is_op("relax.multiply")(x, is_const()), is_const()),
        wildcard(),
        wildcard(),
    )
    softplus = is_op("relax.log")(is_op("relax.add")(is_const(), is_op("relax.exp")(x)))
    clip_of_clip = [
        is_op("relax.clip")(is_op(inner)(x, varg_default_wildcard=True), wildcard(), wildcard())
        for inner in ("relax.nn.relu", "relax.clip", "relax.nn.leakyrelu")
    ]
    forms = [
        *_gelu_forms(x),
        *clip_of_clip,
        is_op("relax.nn.relu")(x),
        is_op("relax.clip")(x, wildcard(), wildcard()),
        is_op("relax.nn.leakyrelu")(x),
        is_op("relax.nn.prelu")(x, is_const()),
        is_op("relax.sigmoid")(x),
        is_op("relax.tanh")(x),
        is_op("relax.multiply")(x, is_op("relax.sigmoid")(x)),
        is_op("relax.multiply")(x, is_op("relax.divide")(relu6[0], is_const())),
        is_op("relax.divide")(is_op("relax.multiply")(x, relu6[1]), is_const()),
        is_op("relax.multiply")(x, hard_sigmoid),
        is_op("relax.multiply")(x, is_op("relax.tanh")(softplus)),
        *(is_op(op)(x) for op in UNARY_TABLES),
        is_op("relax.power")(x, is_const()),
        is_op("relax.divide")(is_const(), x),
    ]
    root = forms[0]
    for form in forms[1:]:
        root = root | form
    return root


def _with_activation(core: DFPattern) -> DFPattern:
    """An activation of core, or core. The longer alternative comes first: an OrPattern takes
    its first alternative that matches, and a wildcard-led core would match a shorter part."""
    return _activations(core) | core


def _affine_step(x: DFPattern) -> DFPattern:
    """x+c, c+x, x-c, c-x, x*c, c*x or x/c (multiply and add match either way round)."""
    return (
        is_op("relax.add")(x, is_const())
        | is_op("relax.subtract")(x, is_const())
        | is_op("relax.subtract")(is_const(), x)
        | is_op("relax.multiply")(x, is_const())
        | is_op("relax.divide")(x, is_const())
    )


def _affine(core: DFPattern, at_least_one: bool = False) -> DFPattern:
    """core followed by up to MAX_AFFINE_STEPS affine steps (at least one if asked)."""
    level = _affine_step(core) if at_least_one else core
    for _ in range(MAX_AFFINE_STEPS - (1 if at_least_one else 0)):
        level = _affine_step(level) | level  # the longest match first
    return level


def _conv2d_pattern(with_pad: bool):
    data, weight = wildcard(), wildcard()
    ann: dict[str, DFPattern] = {"data": data, "weight": weight}
    conv_input = data
    if with_pad:
        conv_input = ann["pad"] = is_op("relax.nn.pad")(data)
    conv = ann["conv"] = is_op("relax.nn.conv2d")(conv_input, weight) | is_op(
        "relax.nn.conv1d"
    )(conv_input, weight)
    biased = conv | is_op("relax.add")(conv, is_const())
    ann["bn"] = is_op("relax.nn.batch_norm")(biased, is_const(), is_const(), is_const(), is_const())
    root = _with_activation(_affine(conv | is_tuple_get_item(ann["bn"], 0)))
    return ("mrvl.conv2d", root, ann, checked(check_conv2d))


def _conv_transpose_pattern():
    data, weight = wildcard(), wildcard()
    ann: dict[str, DFPattern] = {"data": data, "weight": weight}
    conv = ann["conv"] = is_op("relax.nn.conv2d_transpose")(data, weight) | is_op(
        "relax.nn.conv1d_transpose"
    )(data, weight)
    root = _with_activation(_affine(conv))  # a bias add is the first affine step
    return ("mrvl.conv_transpose", root, ann, checked(check_conv_transpose))


def _fc_pattern(with_alpha: bool):
    data, weight = wildcard(), wildcard()
    ann: dict[str, DFPattern] = {"data": data, "weight": weight}
    fc_input = data
    if with_alpha:
        ann["alpha"] = is_const()
        fc_input = ann["scale"] = is_op("relax.multiply")(data, ann["alpha"])
    matmul = ann["matmul"] = is_op("relax.matmul")(fc_input, weight)
    root = _with_activation(_affine(matmul))
    return ("mrvl.fc", root, ann, checked(check_fc))


def _add_pattern():
    ann: dict[str, DFPattern] = {}
    add = ann["add"] = is_op("relax.add")(~is_const(), ~is_const())
    return ("mrvl.add", _with_activation(add), ann, checked(check_add))


def _mul_pattern():
    ann: dict[str, DFPattern] = {}
    mul = ann["mul"] = is_op("relax.multiply")(~is_const(), ~is_const())
    return ("mrvl.mul", _with_activation(mul), ann, checked(check_mul))


def _scale_shift_pattern(activation_only: bool = False):
    """mrvl.scale_shift: affine steps of a tensor with an optional activation, or a lone
    activation (only that with `activation_only`: the activation after a `mrvl.binary` with
    a constant operand, whose step form the longest match took and refused)."""
    data = wildcard()
    ann: dict[str, DFPattern] = {"data": data}
    steps = _affine(data, at_least_one=True)
    root = _activations(steps) | _activations(data) | steps  # the longest match first
    if activation_only:
        root = _activations(data)
    return ("mrvl.scale_shift", root, ann, checked(check_scale_shift))


def _single_op_pattern(name: str, ops: Sequence[str], check, *extra_args: Callable[[], DFPattern]):
    data = wildcard()
    root = None
    for op in ops:
        alternative = is_op(op)(data, *(make() for make in extra_args))
        root = alternative if root is None else root | alternative
    return (name, root, {"data": data, "root": root}, checked(check))


def _copy_pattern(length: int):
    """mrvl.copy: a chain of `length` data-movement ops, innermost annotated `op0`."""
    data = wildcard()
    ann: dict[str, DFPattern] = {"data": data}
    current: DFPattern = data
    for level in range(length):
        step = None
        for op in strided.MOVE_OPS:
            alternative = is_op(op)(current, varg_default_wildcard=True)
            step = alternative if step is None else step | alternative
        current = ann[f"op{level}"] = step
    ann["root"] = current
    return ("mrvl.copy", current, ann, checked(check_copy))


def _reshape_pattern():
    data = wildcard()
    root = (
        is_op("relax.reshape")(data, wildcard())
        | is_op("relax.squeeze")(data)
        | is_op("relax.flatten")(data)
    )
    return ("mrvl.reshape", root, {"data": data, "root": root}, checked(check_reshape))


def _pattern_table() -> list[tuple]:
    """All patterns, highest priority first: larger layers before their parts."""
    return [
        layernorm_pattern(),  # first: its trailing multiply and add are its scale and shift
        decomposed_layernorm_pattern(),
        _conv2d_pattern(with_pad=True),
        _conv2d_pattern(with_pad=False),
        _conv_transpose_pattern(),
        pad_pattern(),  # a pad no conv took as its padding
        # a product of two activations, before fc claims the matmul and rejects it
        *bmm_patterns(),
        _fc_pattern(with_alpha=True),
        _fc_pattern(with_alpha=False),
        reduce_l2_pattern(),  # before mrvl.mul claims its x * x
        _add_pattern(),
        _mul_pattern(),
        _single_op_pattern("mrvl.maxpool2d", ["relax.nn.max_pool2d"], check_pool2d),
        _single_op_pattern("mrvl.avgpool2d", ["relax.nn.avg_pool2d"], check_pool2d),
        _single_op_pattern("mrvl.global_avgpool2d", ["relax.mean"], check_global_pool2d),
        _single_op_pattern("mrvl.global_maxpool2d", ["relax.max"], check_global_pool2d),
        # what the global pools leave: other axes, planes larger than a tile, batches over 8
        reduce_pattern(),
        _single_op_pattern("mrvl.concat", ["relax.concat"], check_concat),
        *quant_patterns(),  # the edges of int8 code (qdq_layers.py)
        softmax_pattern(flattened=True),  # before the copies: its reshapes are its own
        softmax_pattern(flattened=False),
        # a chain of moves is one copy (a channel shuffle's reshape-transpose-reshape)...
        _copy_pattern(3),
        _copy_pattern(2),
        # ...but a lone layout change or reshape stays a relabelling where it is one
        _single_op_pattern("mrvl.transpose", ["relax.permute_dims"], check_transpose),
        _reshape_pattern(),
        _copy_pattern(1),
        _single_op_pattern("mrvl.resize", ["relax.image.resize2d"], check_resize, wildcard),
        # last: only what no conv / fc / add absorbed
        _scale_shift_pattern(),
        # two tensors that broadcast: after every layer that takes an add, mul or activation
        binary_pattern(),
        _scale_shift_pattern(activation_only=True),
    ]


_SITE_ATTR = "mrvl.site"
_SITES = itertools.count()


def site_attrs(annotated) -> dict[str, str]:
    """A number unique to each accepted match, set on its composite function.

    TVM's BlockBuilder shares structurally equal functions, so two identical layers (the same
    weights, or a constant-free activation) would become one composite called twice, carrying
    the ONNX nodes of the first call site only: the other site's nodes would be reported as
    folded away, its instructions would name the wrong node, and its constants would be
    emitted twice under one name. With this attribute no two composites are equal.
    """
    collector = current_collector()
    counter = collector.sites if collector is not None else _SITES
    return {
        _SITE_ATTR: str(next(counter)),
        **weight_scale_attrs(annotated),
        **constant_quant_attrs(annotated),
    }


def mrvl_patterns() -> list:
    """The registered `mrvl.*` FusionPatterns, highest priority first."""
    _register()
    return get_patterns_with_prefix(CODEGEN + ".")


def _register() -> None:
    """Register the table once (re-registering would add duplicate entries).

    `register_patterns` gives later entries higher priority, hence the reversal.
    """
    if get_patterns_with_prefix(CODEGEN + "."):
        return
    register_patterns([(*pattern, site_attrs) for pattern in reversed(_pattern_table())])


_register()
