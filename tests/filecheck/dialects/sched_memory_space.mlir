// RUN: not mrvl-opt %s 2>&1 | filecheck %s

// A buffer's memory space is a sched.memory_space enumeration: a word it does not know is a
// parse error at the word, naming the two it knows.

builtin.module {
  %x = sched.alloc : !sched.buffer<sram, 4xf16>
}
// CHECK: sched_memory_space.mlir:7:{{[0-9]+}}
// CHECK: unknown memory space 'sram' (ddr or ocm)
