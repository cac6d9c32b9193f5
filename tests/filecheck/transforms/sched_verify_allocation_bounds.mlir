// RUN: not mrvl-opt %s -p sched-verify-allocation 2>&1 | filecheck %s

// A buffer past the end of its memory is named with its layer.

builtin.module {
sched.program mcpu("cn10ka") tiles(1) ddr_size(128) const_base(128) const_end(128) {
  %in = sched.io "x" input offset(0) : !sched.buffer<ddr, 1x10xf16>
  %out = sched.io "output0" output offset(120) : !sched.buffer<ddr, 1x10xf16> loc("/out")
  %t1 = sched.dma tile 0 %in [0, 0] -> %out [0, 0] box [1, 10] : !sched.buffer<ddr, 1x10xf16>, !sched.buffer<ddr, 1x10xf16>
}
}

// CHECK: the 20-byte buffer of layer /out in DDR at [120, 140) is outside [0, 128)
