"""The `sched` scheduling dialect: memory and time made explicit.

Tensors become buffers in DDR or in one tile's on-chip memory (OCM), with sizes and (once
allocated) byte offsets. Work becomes DMA transfers and compute tasks, each placed on a tile and
ordered by tokens: a task lists the tokens it waits for (`after(...)`) and yields its own.
Tiling, tile assignment and allocation are all visible here.
"""

# ruff: noqa: F403, F405 - the package re-exports its modules' names, as the one module did
from __future__ import annotations

from xdsl.ir import Dialect

from mrvl.dialects.sched.attributes import *
from mrvl.dialects.sched.buffers import *
from mrvl.dialects.sched.program import *
from mrvl.dialects.sched.tasks import *

Sched = Dialect(
    "sched",
    [
        ProgramOp,
        IOOp,
        ConstOp,
        AllocOp,
        ViewOp,
        ConvertOp,
        DmaOp,
        MulticastDmaOp,
        Conv2DTaskOp,
        Pool2DTaskOp,
        ResizeTaskOp,
        FullyConnectedTaskOp,
        AddTaskOp,
        ScaleTaskOp,
        MulTaskOp,
        SoftmaxTaskOp,
        LayerNormTaskOp,
        LutTaskOp,
    ],
    [BufferType, MemorySpaceAttr, PoolKindAttr, TokenType, WindowPlanAttr, FcPlanAttr],
)

