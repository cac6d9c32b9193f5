"""The `sched` scheduling dialect: memory and time made explicit.

Tensors become buffers in DDR or in one tile's on-chip memory (OCM), with sizes and (once
allocated) byte offsets. Work becomes DMA transfers and compute tasks, each placed on a tile and
ordered by tokens: a task lists the tokens it waits for (`after(...)`) and yields its own.
Tiling, tile assignment and allocation are all visible here.
"""

# ruff: noqa: F403, F405 - the package re-exports its modules' names, as the one module did
from __future__ import annotations

from xdsl.ir import Dialect

from mrvl.dialects import defined_ops_and_attributes
from mrvl.dialects.sched import (
    attributes,
    buffers,
    int8_bmm,
    int8_elementwise,
    int8_resize,
    int8_tasks,
    long_rows,
    program,
    reductions,
    tasks,
)
from mrvl.dialects.sched.attributes import *
from mrvl.dialects.sched.buffers import *
from mrvl.dialects.sched.int8_bmm import *
from mrvl.dialects.sched.int8_elementwise import *
from mrvl.dialects.sched.int8_resize import *
from mrvl.dialects.sched.int8_tasks import *
from mrvl.dialects.sched.long_rows import *
from mrvl.dialects.sched.program import *
from mrvl.dialects.sched.reductions import *
from mrvl.dialects.sched.tasks import *

Sched = Dialect(
    "sched",
    *defined_ops_and_attributes(
        attributes, buffers, int8_tasks, program, tasks, reductions, int8_elementwise,
        int8_resize, long_rows, int8_bmm,
    ),  # fmt: skip
)
"""Every op and attribute that the package's modules define."""
