// RUN: not mrvl-opt %s 2>&1 | filecheck %s

// An enumeration field written as a number must be one of the enumeration's values.

builtin.module {
  mlip.pool tile 0 : in_addr 64, in_shape [1, 4, 4, 1], row0 0, out_addr 96, out_shape [1, 2, 2, 1], orow0 0, kernel [2, 2], stride [2, 2], pad [0, 0], mode 7, in_hw [4, 4], pad_end [0, 0], count_include_pad 0
}
// CHECK: mlip.pool: field mode=7 is not a PoolMode
