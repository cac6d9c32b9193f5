// RUN: mrvl-opt %s --print-debuginfo | filecheck %s
// RUN: mrvl-opt %s --print-debuginfo | mrvl-opt --print-debuginfo | filecheck %s

// Every instruction prints as assembly with all its fields, and parses back unchanged.
// Enumeration fields are words (`act relu`, `mode avg`, `src_dtype f32`).

builtin.module attributes {mlip.program = #mlip.program<target = "cn10ka", tiles = 1, ddr_size = 256, const_base = 128>} {
  mlip.io "x" input [1, 1, 4, 4] f32 at 0
  mlip.consts dense<"0x0000803F"> : tensor<4xui8>
  mlip.cvt tile 0 signal 1 : src_addr 0, src_dtype f32, src_shape [1, 1, 4, 4], dst_addr 192, dst_dtype f16, perm [0, 2, 3, 1]
  mlip.dma tile 0 signal 2 wait [1] : src_space ddr, src_addr 192, src_strides [32, 8, 2, 2], dst_space ocm, dst_addr 0, dst_strides [32, 8, 2, 2], box [1, 4, 4, 1], elem_bytes 2 loc("/conv/Conv")
  mlip.lut tile 0 signal 5 : src_addr 1024, act silu, act_a 0.0, act_b 0.0 loc("/conv/Conv")
  mlip.conv tile 0 signal 3 wait [2, 5] : in_addr 0, in_shape [1, 4, 4, 1], row0 0, out_addr 64, out_shape [1, 4, 4, 1], orow0 0, kernel [3, 3], stride [1, 1], pad [1, 1], dilation [1, 1], groups 1, oc0 0, oc_total 1, w_addr 128, b_addr -1, act leaky_relu, act_a 0.1, act_b 0.0, act_addr -1, acc_addr -1, acc_out 0 loc("/conv/Conv")
  mlip.pool tile 0 signal 4 wait [3] : in_addr 64, in_shape [1, 4, 4, 1], row0 0, out_addr 96, out_shape [1, 2, 2, 1], orow0 0, kernel [2, 2], stride [2, 2], pad [0, 0], mode avg, in_hw [4, 4], pad_end [0, 0], count_include_pad 0 loc("/pool/AveragePool")
  mlip.fc tile 0 wait [4] : in_addr 96, n 1, k 4, o 1, w_addr 128, b_addr -1, out_addr 112, act prelu, act_a 0.0, act_b 0.0, act_addr 160 loc("/fc/Gemm")
  mlip.add tile 0 : a_addr 0, b_addr 32, out_addr 64, count 16, channels 0, act relu, act_a 0.0, act_b 0.0, act_addr -1 loc("/add/Add")
  mlip.scale tile 0 : in_addr 0, out_addr 64, count 16, channels 4, s_addr 128, b_addr 144, act none, act_a 0.0, act_b 0.0, act_addr -1 loc("/bn/BatchNormalization")
  mlip.mul tile 0 : a_addr 0, b_addr 32, out_addr 64, count 16, channels 4, act hard_sigmoid, act_a 0.2, act_b 0.5 loc("/se/Mul")
  mlip.end tile 0
}

// CHECK:      mlip.io "x" input [1, 1, 4, 4] f32 at 0
// CHECK-NEXT: mlip.consts dense<[0, 0, 128, 63]> : tensor<4xui8>
// CHECK-NEXT: mlip.cvt tile 0 signal 1 : src_addr 0, src_dtype f32, src_shape [1, 1, 4, 4], dst_addr 192, dst_dtype f16, perm [0, 2, 3, 1]
// CHECK-NEXT: mlip.dma tile 0 signal 2 wait [1] : src_space ddr, src_addr 192, src_strides [32, 8, 2, 2], dst_space ocm, dst_addr 0, dst_strides [32, 8, 2, 2], box [1, 4, 4, 1], elem_bytes 2 loc("/conv/Conv")
// CHECK-NEXT: mlip.lut tile 0 signal 5 : src_addr 1024, act silu, act_a 0.0, act_b 0.0 loc("/conv/Conv")
// CHECK-NEXT: mlip.conv tile 0 signal 3 wait [2, 5] : in_addr 0, in_shape [1, 4, 4, 1], row0 0, out_addr 64, out_shape [1, 4, 4, 1], orow0 0, kernel [3, 3], stride [1, 1], pad [1, 1], dilation [1, 1], groups 1, oc0 0, oc_total 1, w_addr 128, b_addr -1, act leaky_relu, act_a 0.10000000149011612, act_b 0.0, act_addr -1, acc_addr -1, acc_out 0 loc("/conv/Conv")
// CHECK-NEXT: mlip.pool tile 0 signal 4 wait [3] : {{.*}} mode avg, in_hw [4, 4], pad_end [0, 0], count_include_pad 0 loc("/pool/AveragePool")
// CHECK-NEXT: mlip.fc tile 0 wait [4] : in_addr 96, n 1, k 4, o 1, w_addr 128, b_addr -1, out_addr 112, act prelu, act_a 0.0, act_b 0.0, act_addr 160 loc("/fc/Gemm")
// CHECK-NEXT: mlip.add tile 0 : a_addr 0, b_addr 32, out_addr 64, count 16, channels 0, act relu, act_a 0.0, act_b 0.0, act_addr -1 loc("/add/Add")
// CHECK-NEXT: mlip.scale tile 0 : in_addr 0, out_addr 64, count 16, channels 4, s_addr 128, b_addr 144, act none, act_a 0.0, act_b 0.0, act_addr -1 loc("/bn/BatchNormalization")
// CHECK-NEXT: mlip.mul tile 0 : a_addr 0, b_addr 32, out_addr 64, count 16, channels 4, act hard_sigmoid, act_a 0.20000000298023224, act_b 0.5 loc("/se/Mul")
// CHECK-NEXT: mlip.end tile 0
