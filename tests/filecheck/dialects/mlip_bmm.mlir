// RUN: mrvl-opt %s --split-input-file --verify-diagnostics | filecheck %s

// `bmm` round-trips, and its verifier applies the legal ranges of isa.py.

builtin.module {
  mlip.bmm tile 0 : a_addr 0, b_addr 128, out_addr 256, batch 2, m 4, k 5, n 6, trans_a 0, trans_b 1, a_shared 0, b_shared 1, acc_addr -1, acc_out 0
}
// CHECK: mlip.bmm tile 0 : a_addr 0, b_addr 128, out_addr 256, batch 2, m 4, k 5, n 6, trans_a 0, trans_b 1, a_shared 0, b_shared 1, acc_addr -1, acc_out 0

// -----

builtin.module {
  mlip.bmm tile 0 : a_addr 0, b_addr 128, out_addr 256, batch 2, m 4, k 0, n 6, trans_a 0, trans_b 1, a_shared 0, b_shared 1, acc_addr -1, acc_out 0
}
// CHECK: mlip.bmm: k=0 breaks `k >= 1`

// -----

builtin.module {
  mlip.bmm tile 0 : a_addr 0, b_addr 128, out_addr 256, batch 2, m 4, k 5, n 6, trans_a 2, trans_b 1, a_shared 0, b_shared 1, acc_addr -1, acc_out 0
}
// CHECK: mlip.bmm: trans_a=2 breaks `trans_a in (0, 1)`
