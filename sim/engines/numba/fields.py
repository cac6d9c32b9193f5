"""The ISA as constants for the Numba engine: opcodes, the word offsets of each field in a row
of a `ValidProgram` (`field_words`), and the enumerations the kernels compare with.

Numba freezes module globals into the compiled code, so each is a plain int (or a small array)."""

from __future__ import annotations

import numpy as np

from mrvl import isa
from mrvl.isa import CONV_CI_BLOCK, OPCODE_BY_NAME, TABLE_ACTIVATIONS, Activation, DType, PoolMode
from mrvl.sim.validate import field_words

OP_DMA = OPCODE_BY_NAME["dma"].opcode
OP_CVT = OPCODE_BY_NAME["cvt"].opcode
OP_LUT = OPCODE_BY_NAME["lut"].opcode
OP_MUL = OPCODE_BY_NAME["mul"].opcode
OP_RESIZE = OPCODE_BY_NAME["resize"].opcode
OP_CONV = OPCODE_BY_NAME["conv"].opcode
OP_POOL = OPCODE_BY_NAME["pool"].opcode
OP_FC = OPCODE_BY_NAME["fc"].opcode
OP_BMM = OPCODE_BY_NAME["bmm"].opcode
OP_SOFTMAX = OPCODE_BY_NAME["softmax"].opcode
OP_LAYERNORM = OPCODE_BY_NAME["layernorm"].opcode
OP_ADD = OPCODE_BY_NAME["add"].opcode
OP_SCALE = OPCODE_BY_NAME["scale"].opcode
OP_END = OPCODE_BY_NAME["end"].opcode

_dma = field_words(OPCODE_BY_NAME["dma"])
DMA_SRC_SPACE, DMA_SRC_ADDR, DMA_SRC_STRIDES = (
    _dma["src_space"],
    _dma["src_addr"],
    _dma["src_strides"],
)
DMA_DST_SPACE, DMA_DST_ADDR, DMA_DST_STRIDES = (
    _dma["dst_space"],
    _dma["dst_addr"],
    _dma["dst_strides"],
)
DMA_BOX, DMA_ELEM_BYTES = _dma["box"], _dma["elem_bytes"]

_cvt = field_words(OPCODE_BY_NAME["cvt"])
CVT_SRC_ADDR, CVT_SRC_DTYPE, CVT_SRC_SHAPE = _cvt["src_addr"], _cvt["src_dtype"], _cvt["src_shape"]
CVT_DST_ADDR, CVT_DST_DTYPE, CVT_PERM = _cvt["dst_addr"], _cvt["dst_dtype"], _cvt["perm"]

_lut = field_words(OPCODE_BY_NAME["lut"])
LUT_SRC_ADDR = _lut["src_addr"]

_conv = field_words(OPCODE_BY_NAME["conv"])
CONV_IN_ADDR, CONV_IN_SHAPE, CONV_ROW0 = _conv["in_addr"], _conv["in_shape"], _conv["row0"]
CONV_OUT_ADDR, CONV_OUT_SHAPE, CONV_OROW0 = _conv["out_addr"], _conv["out_shape"], _conv["orow0"]
CONV_KERNEL, CONV_STRIDE, CONV_PAD = _conv["kernel"], _conv["stride"], _conv["pad"]
CONV_DILATION, CONV_GROUPS = _conv["dilation"], _conv["groups"]
CONV_OC0, CONV_OC_TOTAL = _conv["oc0"], _conv["oc_total"]
CONV_W_ADDR, CONV_B_ADDR = _conv["w_addr"], _conv["b_addr"]
CONV_ACT, CONV_ACT_A, CONV_ACT_B = _conv["act"], _conv["act_a"], _conv["act_b"]
CONV_ACT_ADDR = _conv["act_addr"]
CONV_ACC_ADDR, CONV_ACC_OUT = _conv["acc_addr"], _conv["acc_out"]

_pool = field_words(OPCODE_BY_NAME["pool"])
POOL_IN_ADDR, POOL_IN_SHAPE, POOL_ROW0 = _pool["in_addr"], _pool["in_shape"], _pool["row0"]
POOL_OUT_ADDR, POOL_OUT_SHAPE, POOL_OROW0 = _pool["out_addr"], _pool["out_shape"], _pool["orow0"]
POOL_KERNEL, POOL_STRIDE, POOL_PAD = _pool["kernel"], _pool["stride"], _pool["pad"]
POOL_MODE, POOL_IN_HW, POOL_PAD_END = _pool["mode"], _pool["in_hw"], _pool["pad_end"]
POOL_COUNT_INCLUDE_PAD = _pool["count_include_pad"]

_resize = field_words(OPCODE_BY_NAME["resize"])
RESIZE_IN_ADDR, RESIZE_IN_SHAPE = _resize["in_addr"], _resize["in_shape"]
RESIZE_ROW0, RESIZE_OUT_ADDR, RESIZE_OUT_SHAPE = (
    _resize["row0"],
    _resize["out_addr"],
    _resize["out_shape"],
)
RESIZE_YTAB_ADDR, RESIZE_XTAB_ADDR = _resize["ytab_addr"], _resize["xtab_addr"]

_fc = field_words(OPCODE_BY_NAME["fc"])
FC_IN_ADDR, FC_N, FC_K, FC_O = _fc["in_addr"], _fc["n"], _fc["k"], _fc["o"]
FC_W_ADDR, FC_B_ADDR, FC_OUT_ADDR = _fc["w_addr"], _fc["b_addr"], _fc["out_addr"]
FC_ACT, FC_ACT_A, FC_ACT_B, FC_ACT_ADDR = _fc["act"], _fc["act_a"], _fc["act_b"], _fc["act_addr"]

_bmm = field_words(OPCODE_BY_NAME["bmm"])
BMM_A_ADDR, BMM_B_ADDR, BMM_OUT_ADDR = _bmm["a_addr"], _bmm["b_addr"], _bmm["out_addr"]
BMM_BATCH, BMM_M, BMM_K, BMM_N = _bmm["batch"], _bmm["m"], _bmm["k"], _bmm["n"]
BMM_TRANS_A, BMM_TRANS_B = _bmm["trans_a"], _bmm["trans_b"]
BMM_A_SHARED, BMM_B_SHARED = _bmm["a_shared"], _bmm["b_shared"]
BMM_ACC_ADDR, BMM_ACC_OUT = _bmm["acc_addr"], _bmm["acc_out"]

_add = field_words(OPCODE_BY_NAME["add"])
ADD_A_ADDR, ADD_B_ADDR, ADD_OUT_ADDR = _add["a_addr"], _add["b_addr"], _add["out_addr"]
ADD_COUNT, ADD_ACT, ADD_ACT_A, ADD_ACT_B = _add["count"], _add["act"], _add["act_a"], _add["act_b"]
ADD_CHANNELS, ADD_ACT_ADDR = _add["channels"], _add["act_addr"]

_scale = field_words(OPCODE_BY_NAME["scale"])
SCALE_IN_ADDR, SCALE_OUT_ADDR = _scale["in_addr"], _scale["out_addr"]
SCALE_COUNT, SCALE_CHANNELS = _scale["count"], _scale["channels"]
SCALE_S_ADDR, SCALE_B_ADDR = _scale["s_addr"], _scale["b_addr"]
SCALE_ACT, SCALE_ACT_A, SCALE_ACT_B = _scale["act"], _scale["act_a"], _scale["act_b"]
SCALE_ACT_ADDR = _scale["act_addr"]

_mul = field_words(OPCODE_BY_NAME["mul"])
MUL_A_ADDR, MUL_B_ADDR, MUL_OUT_ADDR = _mul["a_addr"], _mul["b_addr"], _mul["out_addr"]
MUL_COUNT, MUL_CHANNELS = _mul["count"], _mul["channels"]
MUL_ACT, MUL_ACT_A, MUL_ACT_B = _mul["act"], _mul["act_a"], _mul["act_b"]

DDR = int(isa.MemSpace.DDR)
F32, F16 = int(DType.F32), int(DType.F16)
DTYPE_SIZE = np.array([isa.DTYPE_BYTES[d] for d in sorted(DType)], np.int64)
ACT_NONE, ACT_RELU = int(Activation.NONE), int(Activation.RELU)
ACT_CLIP, ACT_LEAKY_RELU = int(Activation.CLIP), int(Activation.LEAKY_RELU)
ACT_PRELU = int(Activation.PRELU)
IS_TABLE_ACT = np.array([a in TABLE_ACTIVATIONS for a in sorted(Activation)], np.bool_)
POOL_MAX = int(PoolMode.MAX)
CI_BLOCK = CONV_CI_BLOCK

_softmax = field_words(OPCODE_BY_NAME["softmax"])
SOFTMAX_IN_ADDR, SOFTMAX_OUT_ADDR = _softmax["in_addr"], _softmax["out_addr"]
SOFTMAX_OUTER, SOFTMAX_LENGTH = _softmax["outer"], _softmax["length"]
SOFTMAX_INNER = _softmax["inner"]

_layernorm = field_words(OPCODE_BY_NAME["layernorm"])
LN_IN_ADDR, LN_OUT_ADDR = _layernorm["in_addr"], _layernorm["out_addr"]
LN_ROWS, LN_LENGTH = _layernorm["rows"], _layernorm["length"]
LN_G_ADDR, LN_B_ADDR, LN_EPS = _layernorm["g_addr"], _layernorm["b_addr"], _layernorm["eps"]
