// RUN: mrvl-opt %s --split-input-file --verify-diagnostics | filecheck %s

// The int8 instructions round-trip with every field, and their verifiers apply the legal
// ranges of isa_int8.py: zero points and clamps within int8, a clamp's lo <= hi, the
// conversion types of quant and dequant, the shift ranges of the rescale pairs.

builtin.module {
  mlip.quant tile 0 : src_addr 0, src_dtype f32, src_shape [1, 3, 4, 4], dst_addr 256, perm [0, 2, 3, 1], scale 0.0625, zp -3
  mlip.dequant tile 0 : src_addr 256, src_shape [1, 4, 4, 3], dst_addr 512, dst_dtype f16, perm [0, 3, 1, 2], scale 0.0625, zp -3
  mlip.qconv tile 0 : in_addr 0, in_shape [1, 4, 4, 3], row0 0, out_addr 64, out_shape [1, 4, 4, 8], orow0 0, kernel [3, 3], stride [1, 1], pad [1, 1], dilation [1, 1], groups 1, oc0 0, oc_total 8, w_addr 256, b_addr 512, in_zp -3, out_zp 5, rq_addr 576, clamp [5, 127], lut_addr -1, acc_addr -1, acc_out 0
  mlip.qpool tile 0 : in_addr 64, in_shape [1, 4, 4, 8], row0 0, out_addr 192, out_shape [1, 2, 2, 8], orow0 0, kernel [2, 2], stride [2, 2], pad [0, 0], mode avg, in_hw [4, 4], pad_end [0, 0], count_include_pad 0, in_zp 5, out_zp 5, rq [1073741824, 1]
  mlip.qfc tile 0 : in_addr 192, n 1, k 32, o 10, w_addr 640, b_addr 960, out_addr 1024, in_zp 5, out_zp -1, rq_addr 1088, clamp [-128, 127], lut_addr 1200
  mlip.qadd tile 0 : a_addr 0, b_addr 64, out_addr 128, count 48, a_zp -3, b_zp 5, out_zp 0, a_rq [1073741824, 0], b_rq [1431655765, -1], out_rq [1717986918, -15], clamp [0, 127], lut_addr -1
  mlip.requant tile 0 : in_addr 0, out_addr 64, count 48, in_zp -3, out_zp 2, rq [1288490189, 0], clamp [-128, 127], lut_addr 1200
  mlip.end tile 0
}
// CHECK:      mlip.quant tile 0 : src_addr 0, src_dtype f32, src_shape [1, 3, 4, 4], dst_addr 256, perm [0, 2, 3, 1], scale 0.0625, zp -3
// CHECK-NEXT: mlip.dequant tile 0 : src_addr 256, src_shape [1, 4, 4, 3], dst_addr 512, dst_dtype f16, perm [0, 3, 1, 2], scale 0.0625, zp -3
// CHECK-NEXT: mlip.qconv tile 0 : in_addr 0, in_shape [1, 4, 4, 3], row0 0, out_addr 64, out_shape [1, 4, 4, 8], orow0 0, kernel [3, 3], stride [1, 1], pad [1, 1], dilation [1, 1], groups 1, oc0 0, oc_total 8, w_addr 256, b_addr 512, in_zp -3, out_zp 5, rq_addr 576, clamp [5, 127], lut_addr -1, acc_addr -1, acc_out 0
// CHECK-NEXT: mlip.qpool tile 0 : {{.*}} mode avg, in_hw [4, 4], pad_end [0, 0], count_include_pad 0, in_zp 5, out_zp 5, rq [1073741824, 1]
// CHECK-NEXT: mlip.qfc tile 0 : in_addr 192, n 1, k 32, o 10, w_addr 640, b_addr 960, out_addr 1024, in_zp 5, out_zp -1, rq_addr 1088, clamp [-128, 127], lut_addr 1200
// CHECK-NEXT: mlip.qadd tile 0 : a_addr 0, b_addr 64, out_addr 128, count 48, a_zp -3, b_zp 5, out_zp 0, a_rq [1073741824, 0], b_rq [1431655765, -1], out_rq [1717986918, -15], clamp [0, 127], lut_addr -1
// CHECK-NEXT: mlip.requant tile 0 : in_addr 0, out_addr 64, count 48, in_zp -3, out_zp 2, rq [1288490189, 0], clamp [-128, 127], lut_addr 1200

// -----

builtin.module {
  mlip.qconv tile 0 : in_addr 0, in_shape [1, 4, 4, 3], row0 0, out_addr 64, out_shape [1, 4, 4, 8], orow0 0, kernel [3, 3], stride [1, 1], pad [1, 1], dilation [1, 1], groups 1, oc0 0, oc_total 8, w_addr 256, b_addr 512, in_zp 128, out_zp 5, rq_addr 576, clamp [5, 127], lut_addr -1, acc_addr -1, acc_out 0
}
// CHECK: mlip.qconv: in_zp=128 breaks `-128 <= in_zp <= 127`

// -----

builtin.module {
  mlip.requant tile 0 : in_addr 0, out_addr 64, count 48, in_zp -3, out_zp 2, rq [1288490189, 0], clamp [100, 99], lut_addr -1
}
// CHECK: mlip.requant: clamp=[100, 99] breaks `clamp[0] <= clamp[1]`

// -----

builtin.module {
  mlip.quant tile 0 : src_addr 0, src_dtype i32, src_shape [1, 3, 4, 4], dst_addr 256, perm [0, 2, 3, 1], scale 0.0625, zp 0
}
// CHECK: mlip.quant: src_dtype=I32 breaks `src_dtype in (0, 1)`

// -----

builtin.module {
  mlip.dequant tile 0 : src_addr 256, src_shape [1, 4, 4, 3], dst_addr 512, dst_dtype f16, perm [0, 3, 1, 2], scale 0.0, zp 0
}
// CHECK: mlip.dequant: scale=0.0 breaks `0 < scale <= 3.4028234663852886e+38`

// -----

builtin.module {
  mlip.qadd tile 0 : a_addr 0, b_addr 64, out_addr 128, count 48, a_zp -3, b_zp 5, out_zp 0, a_rq [1073741824, 1], b_rq [1431655765, -1], out_rq [1717986918, -15], clamp [0, 127], lut_addr -1
}
// CHECK: mlip.qadd: a_rq=[1073741824, 1] breaks `-31 <= a_rq[1] <= 0`
