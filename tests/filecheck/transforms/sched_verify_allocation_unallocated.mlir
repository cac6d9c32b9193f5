// RUN: not mrvl-opt %s -p sched-verify-allocation 2>&1 | filecheck %s

// The pass needs sched-allocate's layout first.

builtin.module {
sched.program mcpu("cn10ka") tiles(1) {
  %in = sched.io "x" input offset(0) : !sched.buffer<ddr, 1x10xf16>
}
}

// CHECK: sched.program has no ddr_size, const_base, const_end: run sched-allocate first
