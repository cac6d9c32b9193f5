// RUN: not mrvl-opt %s 2>&1 | filecheck %s

// An I/O table entry's element type is an mlip.dtype enumeration (and its direction an
// mlip.io_kind): a word it does not know is a parse error at the word, naming the words it
// knows.

builtin.module {
  mlip.io "x" input [1, 1, 4, 4] bf16 at 0
}
// CHECK: mlip_io_word.mlir:8:34
// CHECK: Expected `f32`, `f16`, `i8`, or `i32`.
