// RUN: mrvl-opt %s -p mrvl-cast-fp16 --print-debuginfo | filecheck %s --check-prefix=F16
// RUN: mrvl-opt %s -p 'mrvl-cast-fp16,convert-mrvl-to-sched{mcpu=cn10ka num-tiles=1}' --print-debuginfo | filecheck %s
// RUN: mrvl-opt %s -p 'mrvl-cast-fp16,convert-mrvl-to-sched{mcpu=cn10ka num-tiles=1},sched-allocate,convert-sched-to-mlip' | mrvl-opt | filecheck %s --check-prefix=ISA

// Constants read as data: a position embedding [1, 3, 4] added to a sequence [2, 3, 4] (the
// constant repeats over the batch, stride 0), and a class token [2, 1, 4] concatenated before
// it, then an L2 norm over the features (`reduce` mode l2). In an activation layout (NCW)
// the constants become f16 as activations do (the O-layout bias stays f32); they are DDR
// constants the binary loads and the concat copies into place like computed tensors.

func.func @embed(%x: tensor<2x3x4xf32, #mrvl.layout<NCW>>) -> tensor<2x4x1xf32, #mrvl.layout<NCW>> {
  %pos = mrvl.constant "embed_mrvl_const_0" = dense<0.25> : tensor<1x3x4xf32> -> tensor<1x3x4xf32, #mrvl.layout<NCW>> loc("/pos/Add")
  %cls = mrvl.constant "embed_mrvl_const_1" = dense<2.0> : tensor<2x1x4xf32> -> tensor<2x1x4xf32, #mrvl.layout<NCW>> loc("/cls/Concat")
  %0 = mrvl.binary "add" %x, %pos : tensor<2x3x4xf32, #mrvl.layout<NCW>>, tensor<1x3x4xf32, #mrvl.layout<NCW>> -> tensor<2x3x4xf32, #mrvl.layout<NCW>> loc("/pos/Add")
  %1 = mrvl.concat %cls, %0 axis 1 : tensor<2x1x4xf32, #mrvl.layout<NCW>>, tensor<2x3x4xf32, #mrvl.layout<NCW>> -> tensor<2x4x4xf32, #mrvl.layout<NCW>> loc("/cls/Concat")
  %2 = mrvl.reduce "l2" %1 axes [2] : tensor<2x4x4xf32, #mrvl.layout<NCW>> -> tensor<2x4x1xf32, #mrvl.layout<NCW>> loc("/ReduceL2")
  func.return %2 : tensor<2x4x1xf32, #mrvl.layout<NCW>>
}

// F16:      %pos = mrvl.constant "embed_mrvl_const_0" = dense<2.500000e-01> : tensor<1x3x4xf16> -> tensor<1x3x4xf16, #mrvl.layout<NCW>> loc("/pos/Add")
// F16-NEXT: %cls = mrvl.constant "embed_mrvl_const_1" = dense<2.000000e+00> : tensor<2x1x4xf16> -> tensor<2x1x4xf16, #mrvl.layout<NCW>> loc("/cls/Concat")
// F16:      mrvl.binary "add" %x_1, %pos : tensor<2x3x4xf16, #mrvl.layout<NCW>>, tensor<1x3x4xf16, #mrvl.layout<NCW>> -> tensor<2x3x4xf16, #mrvl.layout<NCW>>
// F16:      mrvl.reduce "l2" {{.*}} -> tensor<2x4x1xf16, #mrvl.layout<NCW>> loc("/ReduceL2")

// CHECK:      %[[POS:.*]] = sched.const "embed_mrvl_const_0" = dense<2.500000e-01> : tensor<1x3x4xf16> : !sched.buffer<ddr, 1x3x4xf16>
// CHECK:      %[[CLS:.*]] = sched.const "embed_mrvl_const_1" = dense<2.000000e+00> : tensor<2x1x4xf16> : !sched.buffer<ddr, 2x1x4xf16>
// CHECK:      %[[P:.*]] = sched.view %[[POS]] : !sched.buffer<ddr, 1x3x4xf16> -> !sched.buffer<ddr, 1x1x1x12xf16>
// CHECK:      sched.dma tile 0 %[[P]] [0, 0, 0, 0] -> %{{.*}} [0, 0, 0, 0] box [1, 1, 1, 12]
// CHECK:      sched.binary tile 0 {{.*}} mode "add" strides [24, 24, 12, 1], [12, 12, 0, 1]
// CHECK:      sched.dma tile 0 %[[CLS]] [0, 0, 0] -> %[[CAT:.*]] [0, 0, 0] box [2, 1, 4] :
// CHECK-NEXT: sched.dma tile 0 %{{.*}} [0, 0, 0] -> %[[CAT]] [0, 1, 0] box [2, 3, 4]
// CHECK:      sched.reduce tile 0 {{.*}} mode "l2"

// ISA: mlip.binary tile 0 {{.*}} mode add
// ISA: mlip.reduce tile 0 {{.*}} mode l2, divisor 4, acc_addr -1, acc_out 0
