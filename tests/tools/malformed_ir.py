"""A grammar of malformed IR for mrvl-opt (issue 19): texts of the three dialects broken in
every way a user, a bad pass or a fuzzer could break them.

`WRONG` are inputs that must be refused (the IR is wrong, and the refusal must say where);
`CORRUPT` are mechanical corruptions of valid inputs (truncations, replaced numbers and words),
some of which happen to stay valid: of those only no traceback and no hang is asked.
Each case is (name, text, mrvl-opt arguments after the file).
"""

from __future__ import annotations

import random
import re

MRVL = """builtin.module {
  func.func @region(%in: tensor<1x6x6x1xf32, #mrvl.layout<NHWC>>) -> tensor<1x10xf32, #mrvl.layout<NC>> {
    %x = mrvl.cast %in : tensor<1x6x6x1xf32, #mrvl.layout<NHWC>> -> tensor<1x6x6x1xf16, #mrvl.layout<NHWC>> loc("/in")
    %w = mrvl.constant "region_mrvl_const_0" = dense<0.5> : tensor<3x3x3x1xf16> -> tensor<3x3x3x1xf16, #mrvl.layout<OHWI>> loc("/conv/Conv")
    %b = mrvl.constant "region_mrvl_const_1" = dense<0.25> : tensor<3xf32> -> tensor<3xf32, #mrvl.layout<O>> loc("/conv/Conv")
    %y = mrvl.conv2d %x, %w bias %b pads [1, 1, 1, 1] act relu : (tensor<1x6x6x1xf16, #mrvl.layout<NHWC>>, tensor<3x3x3x1xf16, #mrvl.layout<OHWI>>, tensor<3xf32, #mrvl.layout<O>>) -> tensor<1x6x6x3xf16, #mrvl.layout<NHWC>> loc("/conv/Conv")
    %p = mrvl.maxpool2d %y kernel [2, 2] strides [2, 2] : tensor<1x6x6x3xf16, #mrvl.layout<NHWC>> -> tensor<1x3x3x3xf16, #mrvl.layout<NHWC>> loc("/pool/MaxPool")
    %f = mrvl.reshape %p : tensor<1x3x3x3xf16, #mrvl.layout<NHWC>> -> tensor<1x27xf16, #mrvl.layout<NC>> loc("/flat")
    %v = mrvl.constant "region_mrvl_const_2" = dense<0.5> : tensor<10x27xf16> -> tensor<10x27xf16, #mrvl.layout<OI>> loc("/fc/Gemm")
    %o = mrvl.fc %f, %v : (tensor<1x27xf16, #mrvl.layout<NC>>, tensor<10x27xf16, #mrvl.layout<OI>>) -> tensor<1x10xf16, #mrvl.layout<NC>> loc("/fc/Gemm")
    %out = mrvl.cast %o : tensor<1x10xf16, #mrvl.layout<NC>> -> tensor<1x10xf32, #mrvl.layout<NC>> loc("/out")
    func.return %out : tensor<1x10xf32, #mrvl.layout<NC>>
  }
}
"""
MRVL_PIPELINE = ["-p", "sched-plan-tiling{mcpu=cn10ka num-tiles=2}"]

SCHED = """builtin.module {
sched.program mcpu("cn10ka") tiles(2) ddr_size(4096) const_base(0) const_end(1152) {
  %w = sched.const "w" = dense<1.0> : tensor<2x3x3x4xf16> offset(0) : !sched.buffer<ddr, 2x3x3x4xf16>
  %x = sched.io "x" input offset(2048) : !sched.buffer<ddr, 1x4x4x4xf16>
  %out = sched.io "y" output offset(3072) : !sched.buffer<ddr, 1x2x2x2xf16>
  %in0 = sched.alloc tile(0) offset(0) : !sched.buffer<ocm, 1x4x4x4xf16>
  %l0 = sched.dma tile 0 %x [0, 0, 0, 0] -> %in0 [0, 0, 0, 0] box [1, 4, 4, 4] : !sched.buffer<ddr, 1x4x4x4xf16>, !sched.buffer<ocm, 1x4x4x4xf16>
  %w0 = sched.alloc tile(0) offset(128) : !sched.buffer<ocm, 2x3x3x4xf16>
  %lw0 = sched.dma tile 0 %w [0, 0, 0, 0] -> %w0 [0, 0, 0, 0] box [2, 3, 3, 4] : !sched.buffer<ddr, 2x3x3x4xf16>, !sched.buffer<ocm, 2x3x3x4xf16>
  %o0 = sched.alloc tile(0) offset(448) : !sched.buffer<ocm, 1x2x2x2xf16>
  %c0 = sched.conv2d tile 0 %in0, %w0 -> %o0 in_row 0 out_row 0 channels 0 of 2 kernel [3, 3] strides [1, 1] pads [0, 0, 0, 0] dilations [1, 1] groups 1 after(%l0, %lw0) : !sched.buffer<ocm, 1x4x4x4xf16>, !sched.buffer<ocm, 2x3x3x4xf16> -> !sched.buffer<ocm, 1x2x2x2xf16>
  %s0 = sched.dma tile 0 %o0 [0, 0, 0, 0] -> %out [0, 0, 0, 0] box [1, 2, 2, 2] after(%c0) : !sched.buffer<ocm, 1x2x2x2xf16>, !sched.buffer<ddr, 1x2x2x2xf16>
}
}
"""

MLIP = """builtin.module attributes {mlip.program = #mlip.program<target = "cn10ka", tiles = 1, ddr_size = 256, const_base = 128>} {
  mlip.io "x" input [1, 1, 4, 4] f32 at 0
  mlip.io "y" output [1, 1, 2, 2] f32 at 224
  mlip.consts dense<"0x0000803F"> : tensor<4xui8>
  mlip.cvt tile 0 signal 1 : src_addr 0, src_dtype f32, src_shape [1, 1, 4, 4], dst_addr 192, dst_dtype f16, perm [0, 2, 3, 1]
  mlip.dma tile 0 signal 2 wait [1] : src_space ddr, src_addr 192, src_strides [32, 8, 2, 2], dst_space ocm, dst_addr 0, dst_strides [32, 8, 2, 2], box [1, 4, 4, 1], elem_bytes 2 loc("/conv/Conv")
  mlip.conv tile 0 signal 3 wait [2] : in_addr 0, in_shape [1, 4, 4, 1], row0 0, out_addr 64, out_shape [1, 4, 4, 1], orow0 0, kernel [3, 3], stride [1, 1], pad [1, 1], dilation [1, 1], groups 1, oc0 0, oc_total 1, w_addr 128, b_addr -1, act relu, act_a 0.0, act_b 0.0, act_addr -1, acc_addr -1, acc_out 0 loc("/conv/Conv")
  mlip.pool tile 0 signal 4 wait [3] : in_addr 64, in_shape [1, 4, 4, 1], row0 0, out_addr 96, out_shape [1, 2, 2, 1], orow0 0, kernel [2, 2], stride [2, 2], pad [0, 0], mode avg, in_hw [4, 4], pad_end [0, 0], count_include_pad 0 loc("/pool/AveragePool")
  mlip.end tile 0
}
"""

BASES = {"mrvl": (MRVL, MRVL_PIPELINE), "sched": (SCHED, []), "mlip": (MLIP, [])}


def _sub(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def _nested(depth: int) -> str:
    return "builtin.module {\n" + "builtin.module {\n" * depth + "}\n" * depth + "}\n"


WRONG: list[tuple[str, str, list[str]]] = [
    # sched: what the simulator would refuse
    ("sched-cyclic-wait", _sub(SCHED, "box [1, 4, 4, 4] :", "box [1, 4, 4, 4] after(%c0) :"), []),
    ("sched-tile-9-of-2", _sub(SCHED, "sched.conv2d tile 0", "sched.conv2d tile 9"), []),
    (
        "sched-alloc-tile-5",
        _sub(SCHED, "alloc tile(0) offset(448)", "alloc tile(5) offset(448)"),
        [],
    ),
    ("sched-duplicate-io", _sub(SCHED, 'sched.io "y"', 'sched.io "x"'), []),
    ("sched-tiles-3", _sub(SCHED, "tiles(2)", "tiles(3)"), []),
    ("sched-unknown-mcpu", _sub(SCHED, 'mcpu("cn10ka")', 'mcpu("cn99")'), []),
    # mlip: the ISA table's legal ranges and the program checks
    ("mlip-negative-pad", _sub(MLIP, "pad [1, 1]", "pad [1, -1]"), []),
    ("mlip-zero-stride", _sub(MLIP, "stride [1, 1]", "stride [0, 1]"), []),
    ("mlip-zero-groups", _sub(MLIP, "groups 1", "groups 0"), []),
    ("mlip-pool-in-hw", _sub(MLIP, "in_hw [4, 4]", "in_hw [1, 16]"), []),
    ("mlip-pool-pad-end", _sub(MLIP, "pad_end [0, 0]", "pad_end [-1, 0]"), []),
    ("mlip-huge-kernel", _sub(MLIP, "kernel [2, 2]", "kernel [2147483647, 2147483647]"), []),
    ("mlip-wait-unsignalled", _sub(MLIP, "wait [3]", "wait [9]"), []),
    ("mlip-wait-later", _sub(MLIP, "signal 2 wait [1]", "signal 2 wait [4]"), []),
    ("mlip-tile-outside", _sub(MLIP, "mlip.pool tile 0", "mlip.pool tile 3"), []),
    ("mlip-duplicate-io", _sub(MLIP, 'mlip.io "y"', 'mlip.io "x"'), []),
    ("mlip-acc-out-2", _sub(MLIP, "acc_out 0", "acc_out 2"), []),
    ("mlip-bad-perm", _sub(MLIP, "perm [0, 2, 3, 1]", "perm [0, 2, 2, 1]"), []),
    ("mlip-bad-mode", _sub(MLIP, "mode avg", "mode median"), []),
    ("mlip-i64-field", _sub(MLIP, "kernel [3, 3]", "kernel [3, 4294967299]"), []),
    # mrvl: sizes no target holds, types the MLIP does not compute in
    (
        "mrvl-huge-splat",
        _sub(MRVL, "dense<0.5> : tensor<10x27xf16>", "dense<0.5> : tensor<100000x100000xf16>"),
        [],
    ),
    (
        "mrvl-huge-fc-constant",
        _sub(
            MRVL,
            "dense<0.5> : tensor<10x27xf16> -> tensor<10x27xf16,",
            "dense<0.5> : tensor<1000000x27000xf16> -> tensor<1000000x27000xf16,",
        ),
        [],
    ),
    (
        "mrvl-tensor-beyond-ddr",
        """builtin.module {
  func.func @big(%x: tensor<1x65536x65536x64xf16, #mrvl.layout<NHWC>>) -> tensor<1x32768x32768x64xf16, #mrvl.layout<NHWC>> {
    %y = mrvl.maxpool2d %x kernel [2, 2] strides [2, 2] : tensor<1x65536x65536x64xf16, #mrvl.layout<NHWC>> -> tensor<1x32768x32768x64xf16, #mrvl.layout<NHWC>> loc("/big/MaxPool")
    func.return %y : tensor<1x32768x32768x64xf16, #mrvl.layout<NHWC>>
  }
}
""",
        MRVL_PIPELINE,
    ),
    ("deep-nesting", _nested(3000), []),
    ("unknown-op", _sub(MLIP, "mlip.end tile 0", "mlip.halt tile 0"), []),
    ("missing-field", _sub(MLIP, ", acc_out 0", ""), []),
    ("unknown-field", _sub(MLIP, "acc_out 0", "acc_out 0, extra 1"), []),
    ("unbalanced-brace", MLIP.rstrip().removesuffix("}"), []),
]
"""Inputs that must be refused, each with its location."""

_NUMBER = re.compile(r"(?<![\w.%#@])-?\d+(?![\w.])")


def corrupt(rng: random.Random, count_per_base: int) -> list[tuple[str, str, list[str]]]:
    """Mechanical corruptions of each base: cut at a random point, a number replaced by a
    boundary value, a word replaced by another of the text, a character deleted."""
    cases = []
    for name, (text, args) in BASES.items():
        numbers = list(_NUMBER.finditer(text))
        words = re.findall(r"[a-z_]+", text)
        for k in range(count_per_base):
            kind = k % 4
            if kind == 0:
                cut = rng.randrange(1, len(text) - 1)
                broken = text[:cut]
            elif kind == 1:
                m = rng.choice(numbers)
                value = rng.choice(["-1", "0", "2147483648", "-2147483649", "99999999999999999999"])
                broken = text[: m.start()] + value + text[m.end() :]
            elif kind == 2:
                word = rng.choice(words)
                broken = text.replace(word, rng.choice(words), 1)
            else:
                cut = rng.randrange(len(text))
                broken = text[:cut] + text[cut + 1 :]
            cases.append((f"{name}-corrupt-{k}", broken, args))
    return cases


I32_GRAPH = """builtin.module {
  func.func @r(%x: tensor<1x4x4x2xi32, #mrvl.layout<NHWC>>) -> tensor<1x2x2x2xi32, #mrvl.layout<NHWC>> {
    %y = mrvl.maxpool2d %x kernel [2, 2] strides [2, 2] : tensor<1x4x4x2xi32, #mrvl.layout<NHWC>> -> tensor<1x2x2x2xi32, #mrvl.layout<NHWC>> loc("/p/MaxPool")
    func.return %y : tensor<1x2x2x2xi32, #mrvl.layout<NHWC>>
  }
}
"""
WRONG.append(
    (
        "mrvl-i32-after-cast-fp16",
        I32_GRAPH,
        ["-p", "mrvl-cast-fp16,convert-mrvl-to-sched{mcpu=cn10ka num-tiles=1}"],
    )
)
WRONG.append(
    (
        "sched-task-and-buffer-on-tile-9",
        _sub(
            _sub(SCHED, "%in0 = sched.alloc tile(0)", "%in0 = sched.alloc tile(9)"),
            "%l0 = sched.dma tile 0",
            "%l0 = sched.dma tile 9",
        ),
        [],
    )
)
