// RUN: mrvl-opt %s -p convert-sched-to-mlip --print-debuginfo | filecheck %s
// RUN: mrvl-opt %s -p convert-sched-to-mlip | mrvl-opt | filecheck %s --check-prefix=ROUND

// A sched.bmm is one `bmm`: byte addresses, the dimensions read off its buffers (batch, M, K,
// N), the transposes, an operand of one matrix shared by the batch, and the partial sums it
// continues (acc_addr) or writes (acc_out).

builtin.module {
sched.program mcpu("cn10ka") tiles(1) ddr_size(64) const_base(0) const_end(0) {
  %a = sched.alloc tile(0) offset(0) : !sched.buffer<ocm, 3x4x5xf16>
  %b = sched.alloc tile(0) offset(128) : !sched.buffer<ocm, 1x6x5xf16>
  %p = sched.alloc tile(0) offset(256) : !sched.buffer<ocm, 3x4x6xf32>
  %t0 = sched.bmm tile 0 %a, %b -> %p trans_b acc_out : !sched.buffer<ocm, 3x4x5xf16>, !sched.buffer<ocm, 1x6x5xf16> -> !sched.buffer<ocm, 3x4x6xf32> loc("/attn/MatMul")
  %c = sched.alloc tile(0) offset(640) : !sched.buffer<ocm, 1x5x4xf16>
  %d = sched.alloc tile(0) offset(704) : !sched.buffer<ocm, 3x5x6xf16>
  %o = sched.alloc tile(0) offset(896) : !sched.buffer<ocm, 3x4x6xf16>
  %t1 = sched.bmm tile 0 %c, %d acc(%p : !sched.buffer<ocm, 3x4x6xf32>) -> %o trans_a after(%t0) : !sched.buffer<ocm, 1x5x4xf16>, !sched.buffer<ocm, 3x5x6xf16> -> !sched.buffer<ocm, 3x4x6xf16> loc("/attn/MatMul")
}
}

// CHECK:      mlip.bmm tile 0 signal 1 : a_addr 0, b_addr 128, out_addr 256, batch 3, m 4, k 5, n 6, trans_a 0, trans_b 1, a_shared 0, b_shared 1, acc_addr -1, acc_out 1 loc("/attn/MatMul")
// CHECK-NEXT: mlip.bmm tile 0 wait [1] : a_addr 640, b_addr 704, out_addr 896, batch 3, m 4, k 5, n 6, trans_a 1, trans_b 0, a_shared 1, b_shared 0, acc_addr 256, acc_out 0 loc("/attn/MatMul")
// CHECK-NEXT: mlip.end tile 0

// ROUND: mlip.bmm tile 0 signal 1 : a_addr 0, b_addr 128, out_addr 256, batch 3, m 4, k 5, n 6, trans_a 0, trans_b 1, a_shared 0, b_shared 1, acc_addr -1, acc_out 1
// ROUND: mlip.bmm tile 0 wait [1] : a_addr 640, {{.*}} acc_addr 256, acc_out 0
