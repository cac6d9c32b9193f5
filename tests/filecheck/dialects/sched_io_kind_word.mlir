// RUN: not mrvl-opt %s 2>&1 | filecheck %s

// A region I/O buffer's direction is a sched.io_kind enumeration: a word it does not know is a
// parse error at the word, naming the words it knows.

builtin.module {
  sched.program mcpu("cn10ka") tiles(1) {
    %x = sched.io "x" sideways : !sched.buffer<ddr, 4xf32>
  }
}
// CHECK: sched_io_kind_word.mlir:8:23
// CHECK: Expected `input`, or `output`.
