"""The `sched` scheduling dialect: memory and time made explicit.

Tensors become buffers in DDR or in one tile's on-chip memory (OCM), with sizes and (once
allocated) byte offsets. Work becomes DMA transfers and compute tasks, each placed on a tile and
ordered by tokens: a task lists the tokens it waits for (`after(...)`) and yields its own.
Tiling, tile assignment and allocation are all visible here.
"""

from __future__ import annotations

from xdsl.ir import Dialect

from mrvl.dialects.sched.attributes import (
    MEMORY_SPACES,
    BufferType,
    FcPlanAttr,
    MemorySpace,
    MemorySpaceAttr,
    PoolKind,
    PoolKindAttr,
    TokenType,
    WindowPlanAttr,
    buffer_type,
)
from mrvl.dialects.sched.buffers import (
    AllocOp,
    BufferDefBase,
    ConstOp,
    IOOp,
    ViewOp,
)
from mrvl.dialects.sched.program import (
    ProgramOp,
    program_of,
    verify_program_body,
)
from mrvl.dialects.sched.tasks import (
    SLOPES_FORMAT,
    AddTaskOp,
    Conv2DTaskOp,
    ConvertOp,
    DmaBase,
    DmaOp,
    FullyConnectedTaskOp,
    LutTaskOp,
    MulTaskOp,
    MulticastDmaOp,
    Pool2DTaskOp,
    ResizeTaskOp,
    ScaleTaskOp,
    TaskBase,
    WindowTaskBase,
)

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
        LutTaskOp,
    ],
    [BufferType, MemorySpaceAttr, PoolKindAttr, TokenType, WindowPlanAttr, FcPlanAttr],
)

__all__ = [
    "Sched",
    "MEMORY_SPACES",
    "BufferType",
    "FcPlanAttr",
    "MemorySpace",
    "MemorySpaceAttr",
    "PoolKind",
    "PoolKindAttr",
    "TokenType",
    "WindowPlanAttr",
    "buffer_type",
    "AllocOp",
    "BufferDefBase",
    "ConstOp",
    "IOOp",
    "ViewOp",
    "ProgramOp",
    "program_of",
    "verify_program_body",
    "SLOPES_FORMAT",
    "AddTaskOp",
    "Conv2DTaskOp",
    "ConvertOp",
    "DmaBase",
    "DmaOp",
    "FullyConnectedTaskOp",
    "LutTaskOp",
    "MulTaskOp",
    "MulticastDmaOp",
    "Pool2DTaskOp",
    "ResizeTaskOp",
    "ScaleTaskOp",
    "TaskBase",
    "WindowTaskBase",
]
