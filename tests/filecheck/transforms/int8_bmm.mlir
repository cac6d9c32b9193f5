// RUN: mrvl-opt %s -p 'mrvl-fold-qdq' | filecheck %s --check-prefix=FOLD
// RUN: mrvl-opt %s -p 'mrvl-fold-qdq,convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' --print-debuginfo | mrvl-opt --print-debuginfo | filecheck %s --check-prefix=SCHED
// RUN: mrvl-opt %s -p 'mrvl-fold-qdq,convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2},sched-allocate,convert-sched-to-mlip' | mrvl-opt | filecheck %s --check-prefix=MLIP

// A QDQ model's Q·Kᵀ over 4 heads (passes/graph/fold_qdq_bmm.py): quantize(bmm(dequantize(a),
// dequantize(b))) is one mrvl.qbmm on i8 with both operands' and the result's quantization;
// the rank-4 view of its result (a reshape the quantize reads through) moves after it. The
// lowering cuts it as the fp16 bmm, a piece of 2 heads per tile in 1-byte elements, each one
// sched.qbmm with the zero points and the pair of s_a·s_b/s_y = 0.5·0.25/2 = 2^-4
// (multiplier 2^30, shift -3), selected as mlip.qbmm.

builtin.module {
  func.func @attn(%a: tensor<4x5x8xf32, #mrvl.layout<NCW>>, %b: tensor<4x7x8xf32, #mrvl.layout<NCW>>) -> tensor<1x4x5x7xf32, #mrvl.layout<NCHW>> {
    %qa = mrvl.quantize %a quant <0.5, 3> : tensor<4x5x8xf32, #mrvl.layout<NCW>> -> tensor<4x5x8xi8, #mrvl.layout<NCW>>
    %qb = mrvl.quantize %b quant <0.25, -2> : tensor<4x7x8xf32, #mrvl.layout<NCW>> -> tensor<4x7x8xi8, #mrvl.layout<NCW>>
    %da = mrvl.dequantize %qa quant <0.5, 3> : tensor<4x5x8xi8, #mrvl.layout<NCW>> -> tensor<4x5x8xf32, #mrvl.layout<NCW>>
    %db = mrvl.dequantize %qb quant <0.25, -2> : tensor<4x7x8xi8, #mrvl.layout<NCW>> -> tensor<4x7x8xf32, #mrvl.layout<NCW>>
    %s = mrvl.bmm %da, %db trans_b : (tensor<4x5x8xf32, #mrvl.layout<NCW>>, tensor<4x7x8xf32, #mrvl.layout<NCW>>) -> tensor<4x5x7xf32, #mrvl.layout<NCW>> loc("/attn/MatMul")
    %r = mrvl.reshape %s : tensor<4x5x7xf32, #mrvl.layout<NCW>> -> tensor<1x4x5x7xf32, #mrvl.layout<NCHW>> loc("/attn/MatMul")
    %qs = mrvl.quantize %r quant <2.0, 1> : tensor<1x4x5x7xf32, #mrvl.layout<NCHW>> -> tensor<1x4x5x7xi8, #mrvl.layout<NCHW>>
    %y = mrvl.dequantize %qs quant <2.0, 1> : tensor<1x4x5x7xi8, #mrvl.layout<NCHW>> -> tensor<1x4x5x7xf32, #mrvl.layout<NCHW>>
    func.return %y : tensor<1x4x5x7xf32, #mrvl.layout<NCHW>>
  }
}

// FOLD:      %[[QA:.*]] = mrvl.quantize %a quant <0.5, 3>
// FOLD-NEXT: %[[QB:.*]] = mrvl.quantize %b quant <0.25, -2>
// FOLD-NEXT: %[[S:.*]] = mrvl.qbmm %[[QA]], %[[QB]] trans_b in_quant [#mrvl.quant<0.5, 3>, #mrvl.quant<0.25, -2>] out_quant <2.0, 1> : (tensor<4x5x8xi8, #mrvl.layout<NCW>>, tensor<4x7x8xi8, #mrvl.layout<NCW>>) -> tensor<4x5x7xi8, #mrvl.layout<NCW>>
// FOLD-NEXT: %[[R:.*]] = mrvl.reshape %[[S]] : tensor<4x5x7xi8, #mrvl.layout<NCW>> -> tensor<1x4x5x7xi8, #mrvl.layout<NCHW>>
// FOLD-NEXT: mrvl.dequantize %[[R]] quant <2.0, 1>
// FOLD-NOT:  mrvl.bmm

// SCHED:      %[[A0:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 2x5x8xi8>
// SCHED-NEXT: %[[TA0:.*]] = sched.dma tile 0 %[[QA:.*]] [0, 0, 0] -> %[[A0]] [0, 0, 0] box [2, 5, 8]
// SCHED:      %[[B0:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 2x7x8xi8>
// SCHED-NEXT: %[[TB0:.*]] = sched.dma tile 0 %[[QB:.*]] [0, 0, 0] -> %[[B0]] [0, 0, 0] box [2, 7, 8]
// SCHED:      %[[O0:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 2x5x7xi8>
// SCHED-NEXT: %[[T0:.*]] = sched.qbmm tile 0 %[[A0]], %[[B0]] -> %[[O0]] trans_b rhs_zp -2 rq [1073741824, -3] in_zp 3 out_zp 1 clamp [-128, 127] after(%[[TA0]], %[[TB0]]) : !sched.buffer<ocm, 2x5x8xi8>, !sched.buffer<ocm, 2x7x8xi8> -> !sched.buffer<ocm, 2x5x7xi8> loc("/attn/MatMul")
// SCHED-NEXT: sched.dma tile 0 %[[O0]] [0, 0, 0] -> %[[Y:.*]] [0, 0, 0] box [2, 5, 7] after(%[[T0]])
// SCHED:      sched.dma tile 1 %[[QA]] [2, 0, 0] -> %{{.*}} [0, 0, 0] box [2, 5, 8]
// SCHED:      sched.dma tile 1 %[[QB]] [2, 0, 0] -> %{{.*}} [0, 0, 0] box [2, 7, 8]
// SCHED:      sched.qbmm tile 1 {{.*}} trans_b rhs_zp -2 rq [1073741824, -3] in_zp 3 out_zp 1
// SCHED-NEXT: sched.dma tile 1 %{{.*}} [0, 0, 0] -> %[[Y]] [2, 0, 0] box [2, 5, 7]
// SCHED:      sched.view %[[Y]] : !sched.buffer<ddr, 4x5x7xi8> -> !sched.buffer<ddr, 1x4x5x7xi8>
// SCHED-NOT:  sched.bmm

// MLIP:       mlip.qbmm tile 0 {{.*}}: a_addr {{[0-9]+}}, b_addr {{[0-9]+}}, out_addr {{[0-9]+}}, batch 2, m 5, k 8, n 7, trans_a 0, trans_b 1, a_shared 0, b_shared 0, a_zp 3, b_zp -2, out_zp 1, rq [1073741824, -3], clamp [-128, 127], lut_addr -1, acc_addr -1, acc_out 0
// MLIP:       mlip.qbmm tile 1 {{.*}}: a_addr {{[0-9]+}}, b_addr {{[0-9]+}}, out_addr {{[0-9]+}}, batch 2, m 5, k 8, n 7
