// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=1}' --print-debuginfo | filecheck %s
// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=1},sched-allocate,convert-sched-to-mlip' --print-debuginfo | filecheck %s --check-prefix=ISA
// RUN: mrvl-opt %s --print-debuginfo | filecheck %s --check-prefix=ROUNDTRIP

// The unary table activations of issue 21: GELU fused into a conv, POW (its exponent in
// `alpha`, carried to the ISA as act_a and in the table's name) fused into an fc, ERF on a
// scale_shift. Each loads its own table, named by the activation.

builtin.module {
  func.func @region(%x32: tensor<1x4x4x8xf32, #mrvl.layout<NHWC>>, %v32: tensor<2x8xf32, #mrvl.layout<NC>>) -> (tensor<1x4x4x8xf32, #mrvl.layout<NHWC>>, tensor<2x8xf32, #mrvl.layout<NC>>) {
    %x = mrvl.cast %x32 : tensor<1x4x4x8xf32, #mrvl.layout<NHWC>> -> tensor<1x4x4x8xf16, #mrvl.layout<NHWC>> loc("/in")
    %v = mrvl.cast %v32 : tensor<2x8xf32, #mrvl.layout<NC>> -> tensor<2x8xf16, #mrvl.layout<NC>> loc("/in")
    %w = mrvl.constant "w" = dense<0.5> : tensor<8x1x1x8xf16> -> tensor<8x1x1x8xf16, #mrvl.layout<OHWI>>
    %1 = mrvl.conv2d %x, %w act gelu : (tensor<1x4x4x8xf16, #mrvl.layout<NHWC>>, tensor<8x1x1x8xf16, #mrvl.layout<OHWI>>) -> tensor<1x4x4x8xf16, #mrvl.layout<NHWC>> loc("/c1/Conv")
    %s = mrvl.constant "s" = dense<1.0> : tensor<8xf32> -> tensor<8xf32, #mrvl.layout<O>>
    %2 = mrvl.scale_shift %1, %s, %s act erf : (tensor<1x4x4x8xf16, #mrvl.layout<NHWC>>, tensor<8xf32, #mrvl.layout<O>>, tensor<8xf32, #mrvl.layout<O>>) -> tensor<1x4x4x8xf16, #mrvl.layout<NHWC>> loc("/erf/Erf")
    %fw = mrvl.constant "fw" = dense<0.25> : tensor<8x8xf16> -> tensor<8x8xf16, #mrvl.layout<OI>>
    %3 = mrvl.fc %v, %fw act pow alpha 3.0 : (tensor<2x8xf16, #mrvl.layout<NC>>, tensor<8x8xf16, #mrvl.layout<OI>>) -> tensor<2x8xf16, #mrvl.layout<NC>> loc("/pow/Pow")
    %o1 = mrvl.cast %2 : tensor<1x4x4x8xf16, #mrvl.layout<NHWC>> -> tensor<1x4x4x8xf32, #mrvl.layout<NHWC>>
    %o2 = mrvl.cast %3 : tensor<2x8xf16, #mrvl.layout<NC>> -> tensor<2x8xf32, #mrvl.layout<NC>>
    func.return %o1, %o2 : tensor<1x4x4x8xf32, #mrvl.layout<NHWC>>, tensor<2x8xf32, #mrvl.layout<NC>>
  }
}

// ROUNDTRIP: mrvl.conv2d %{{.*}}, %w act gelu : {{.*}} loc("/c1/Conv")
// ROUNDTRIP: mrvl.scale_shift %{{.*}}, %s, %s act erf : {{.*}} loc("/erf/Erf")
// ROUNDTRIP: mrvl.fc %{{.*}}, %fw act pow alpha 3.000000e+00 : {{.*}} loc("/pow/Pow")

// CHECK:      %[[G:.*]] = sched.const "mrvl_lut_gelu" = dense<{{.*}}> : !sched.buffer<ddr, 65536xf16> loc("/c1/Conv")
// CHECK-NEXT: %[[LG:.*]] = sched.lut tile 0 %[[G]] act gelu : !sched.buffer<ddr, 65536xf16> loc("/c1/Conv")
// CHECK:      sched.conv2d tile 0 {{.*}} act gelu after({{.*}}%[[LG]]{{.*}}) {{.*}} loc("/c1/Conv")
// CHECK:      %[[E:.*]] = sched.const "mrvl_lut_erf" = dense<{{.*}}> : !sched.buffer<ddr, 65536xf16> loc("/erf/Erf")
// CHECK-NEXT: sched.lut tile 0 %[[E]] act erf after({{.*}}) : {{.*}} loc("/erf/Erf")
// CHECK:      sched.scale tile 0 {{.*}} act erf after({{.*}}) {{.*}} loc("/erf/Erf")
// CHECK:      %[[P:.*]] = sched.const "mrvl_lut_pow_40400000_00000000" = dense<{{.*}}> : !sched.buffer<ddr, 65536xf16> loc("/pow/Pow")
// CHECK-NEXT: sched.lut tile 0 %[[P]] act pow alpha 3.000000e+00 after({{.*}}) : {{.*}} loc("/pow/Pow")
// CHECK:      sched.fc tile 0 {{.*}} act pow alpha 3.000000e+00 after({{.*}}) {{.*}} loc("/pow/Pow")

// ISA:      mlip.lut tile 0 {{.*}}: src_addr {{[0-9]+}}, act gelu, act_a 0.0, act_b 0.0 loc("/c1/Conv")
// ISA:      mlip.conv tile 0 {{.*}} act gelu, act_a 0.0, act_b 0.0, {{.*}} loc("/c1/Conv")
// ISA:      mlip.lut tile 0 {{.*}}: src_addr {{[0-9]+}}, act erf, act_a 0.0, act_b 0.0 loc("/erf/Erf")
// ISA:      mlip.scale tile 0 {{.*}} act erf, act_a 0.0, act_b 0.0, {{.*}} loc("/erf/Erf")
// ISA:      mlip.lut tile 0 {{.*}}: src_addr {{[0-9]+}}, act pow, act_a 3.0, act_b 0.0 loc("/pow/Pow")
// ISA:      mlip.fc tile 0 {{.*}} act pow, act_a 3.0, act_b 0.0{{.*}} loc("/pow/Pow")
