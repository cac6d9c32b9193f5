// RUN: mrvl-opt %s --print-debuginfo | filecheck %s
// RUN: mrvl-opt %s --print-debuginfo | mrvl-opt --print-debuginfo | filecheck %s

// The int8 tasks in their custom forms: the edges (quantize / dequantize with a permutation),
// an int8 conv with its requantization pairs, fc, add and pool.

builtin.module {
sched.program mcpu("cn10ka") tiles(1) symbol("region") {
  %x = sched.io "x" input : !sched.buffer<ddr, 1x2x4x4xf32>
  %y = sched.io "output0" output : !sched.buffer<ddr, 1x4xf32>
  %q = sched.alloc : !sched.buffer<ddr, 1x4x4x2xi8>
  %t0 = sched.quantize tile 0 %x -> %q perm [0, 2, 3, 1] quant <0.5, -3> : !sched.buffer<ddr, 1x2x4x4xf32>, !sched.buffer<ddr, 1x4x4x2xi8> loc("x_QuantizeLinear")
  %win = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x4x2xi8>
  %w = sched.alloc tile(0) : !sched.buffer<ocm, 4x1x1x2xi8>
  %b = sched.alloc tile(0) : !sched.buffer<ocm, 4xi32>
  %rq = sched.alloc tile(0) : !sched.buffer<ocm, 4x2xi32>
  %o = sched.alloc tile(0) : !sched.buffer<ocm, 1x4x4x4xi8>
  %t1 = sched.qconv2d tile 0 %win, %w bias %b requant %rq -> %o in_row 0 out_row 0 channels 0 of 4 kernel [1, 1] strides [1, 1] pads [0, 0, 0, 0] dilations [1, 1] groups 1 in_zp -3 out_zp -128 clamp [-128, 127] after(%t0) : !sched.buffer<ocm, 1x4x4x2xi8>, !sched.buffer<ocm, 4x1x1x2xi8>, !sched.buffer<ocm, 4x2xi32>, bias !sched.buffer<ocm, 4xi32> -> !sched.buffer<ocm, 1x4x4x4xi8> loc("/conv/Conv")
  %s = sched.alloc tile(0) : !sched.buffer<ocm, 64xi8>
  %a = sched.alloc tile(0) : !sched.buffer<ocm, 64xi8>
  %t2 = sched.qadd tile 0 %s, %s -> %a zp(-128, -128, 0) rq([1073741824, 0], [1073741824, 0], [1073741824, -19]) clamp [0, 127] after(%t1) : !sched.buffer<ocm, 64xi8>, !sched.buffer<ocm, 64xi8> -> !sched.buffer<ocm, 64xi8> loc("/add/Add")
  %p = sched.alloc tile(0) : !sched.buffer<ocm, 1x1x1x4xi8>
  %t3 = sched.qpool2d tile 0 avg %o -> %p in_row 0 out_row 0 of [4, 4] kernel [4, 4] strides [1, 1] pads [0, 0, 0, 0] in_zp -128 out_zp -128 rq [1073741824, 1] after(%t2) : !sched.buffer<ocm, 1x4x4x4xi8> -> !sched.buffer<ocm, 1x1x1x4xi8> loc("/pool/GlobalAveragePool")
  %fw = sched.alloc tile(0) : !sched.buffer<ocm, 4x4xi8>
  %frq = sched.alloc tile(0) : !sched.buffer<ocm, 4x2xi32>
  %fx = sched.alloc tile(0) : !sched.buffer<ocm, 1x4xi8>
  %fo = sched.alloc tile(0) : !sched.buffer<ocm, 1x4xi8>
  %t4 = sched.qfc tile 0 %fx, %fw requant %frq -> %fo in_zp -128 out_zp 5 clamp [-128, 127] after(%t3) : !sched.buffer<ocm, 1x4xi8>, !sched.buffer<ocm, 4x4xi8>, !sched.buffer<ocm, 4x2xi32> -> !sched.buffer<ocm, 1x4xi8> loc("/fc/Gemm")
  %d = sched.alloc : !sched.buffer<ddr, 1x4xi8>
  %t5 = sched.dequantize tile 0 %d -> %y perm [0, 1] quant <0.125, 5> after(%t4) : !sched.buffer<ddr, 1x4xi8>, !sched.buffer<ddr, 1x4xf32> loc("y_DequantizeLinear")
}
}

// CHECK: %t0 = sched.quantize tile 0 %x -> %q perm [0, 2, 3, 1] quant <0.5, -3> : !sched.buffer<ddr, 1x2x4x4xf32>, !sched.buffer<ddr, 1x4x4x2xi8> loc("x_QuantizeLinear")
// CHECK: %t1 = sched.qconv2d tile 0 %win, %w bias %b requant %rq -> %o in_row 0 out_row 0 channels 0 of 4 kernel [1, 1] strides [1, 1] pads [0, 0, 0, 0] dilations [1, 1] groups 1 in_zp -3 out_zp -128 clamp [-128, 127] after(%t0) : {{.*}} loc("/conv/Conv")
// CHECK: %t2 = sched.qadd tile 0 %s, %s -> %a zp(-128, -128, 0) rq([1073741824, 0], [1073741824, 0], [1073741824, -19]) clamp [0, 127] after(%t1)
// CHECK: %t3 = sched.qpool2d tile 0 avg %o -> %p in_row 0 out_row 0 of [4, 4] kernel [4, 4] strides [1, 1] pads [0, 0, 0, 0] in_zp -128 out_zp -128 rq [1073741824, 1] after(%t2)
// CHECK: %t4 = sched.qfc tile 0 %fx, %fw requant %frq -> %fo in_zp -128 out_zp 5 clamp [-128, 127] after(%t3)
// CHECK: %t5 = sched.dequantize tile 0 %d -> %y perm [0, 1] quant <0.125, 5> after(%t4) : !sched.buffer<ddr, 1x4xi8>, !sched.buffer<ddr, 1x4xf32> loc("y_DequantizeLinear")
