"""The Numba engine: the same machine as the reference interpreter, compiled, bit for bit.

The whole instruction stream runs in one compiled call over the typed rows of a `ValidProgram`
(`words`, `floats`) and the byte arrays of `Memory`; with more threads (`threads`), each runs
that call and they share the large convs, adds and pools. Validation has proved every access in
bounds, and Numba does no bounds checking, so nothing here checks anything. By job:

- `jit`: the one decorator and the on-disk cache (`cache_dir`), so only the first run on a
  machine compiles (see `bench/simulator.py` for the cost);
- `fields`: the ISA table as constants (opcodes, field offsets in a row);
- `numerics`: fp16 <-> fp32 bit for bit (docs/isa.md §4), loads, stores and the fused finish;
- `dma`: `dma`, `cvt` and `lut`;
- `mac_tiles` and `mac`: the multiply-accumulate blocks, and the `conv` and `fc` instructions;
- `vector`: `pool`, `resize`, `add`, `scale` and `mul`;
- `int8`, `int8_conv`, `int8_mac`, `int8_weights`, `int8_resize`: the int8 instructions
  (`qconv` on int32 multiply-accumulate blocks, with its packed weights kept between runs);
- `sharing`: which instructions the threads share, and how they take their work in chunks;
- `dispatch`: one kernel per opcode in a table, the compiled loop, and `execute`.

The weight cache and multicast expansion, which any engine can use, are `mrvl.sim.weight_cache`
and `mrvl.sim.multicast`.
"""

from mrvl.sim.engines.numba.dispatch import execute
from mrvl.sim.engines.numba.jit import cache_dir
from mrvl.sim.engines.numba.sharing import THREADS_ENV, threads

__all__ = ["THREADS_ENV", "cache_dir", "execute", "threads"]
