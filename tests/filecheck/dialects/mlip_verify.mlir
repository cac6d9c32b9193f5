// RUN: not mrvl-opt %s --split-input-file 2>&1 | filecheck %s

// A malformed instruction is reported at its line and column.

builtin.module {
  mlip.fc tile 0 : in_addr 0, n 1, k 4, w_addr 0, o 1, b_addr -1, out_addr 0, act none, act_a 0.0, act_b 0.0, act_addr -1
}
// CHECK: mlip_verify.mlir:6:{{[0-9]+}}
// CHECK: Expected 'o' (field 3 of fc)
