// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' --print-debuginfo | filecheck %s

// A Linear layer on a channels-last plane (ConvNeXt's MLP: a MatMul of [1, 4, 4, 8] by a
// constant [8, 12]), as the importer writes it: the plane in Relax's order (NCHW of the
// [N, H, W, C] shape) viewed as its 16 rows [16, 8], one fc over the rows with its GELU, and
// the rows viewed back as [1, 4, 4, 12]. Both views are relabellings of the same DDR bytes
// (no copy): the fc reads its rows from the input buffer and writes them into the output.

builtin.module {
  func.func @region(%x: tensor<1x4x4x8xf16, #mrvl.layout<NCHW>>) -> tensor<1x4x4x12xf16, #mrvl.layout<NCHW>> {
    %rows = mrvl.reshape %x : tensor<1x4x4x8xf16, #mrvl.layout<NCHW>> -> tensor<16x8xf16, #mrvl.layout<NC>> loc("/fc1/MatMul")
    %w = mrvl.constant "w" = dense<0.25> : tensor<12x8xf16> -> tensor<12x8xf16, #mrvl.layout<OI>> loc("/fc1/MatMul")
    %b = mrvl.constant "b" = dense<0.5> : tensor<12xf32> -> tensor<12xf32, #mrvl.layout<O>> loc("/fc1/MatMul")
    %y = mrvl.fc %rows, %w bias %b act gelu : (tensor<16x8xf16, #mrvl.layout<NC>>, tensor<12x8xf16, #mrvl.layout<OI>>, tensor<12xf32, #mrvl.layout<O>>) -> tensor<16x12xf16, #mrvl.layout<NC>> loc("/fc1/MatMul")
    %plane = mrvl.reshape %y : tensor<16x12xf16, #mrvl.layout<NC>> -> tensor<1x4x4x12xf16, #mrvl.layout<NCHW>> loc("/fc1/MatMul")
    %out = mrvl.layout_convert %plane : tensor<1x4x4x12xf16, #mrvl.layout<NCHW>> -> tensor<1x4x4x12xf16, #mrvl.layout<NCHW>> loc("/out")
    func.return %out : tensor<1x4x4x12xf16, #mrvl.layout<NCHW>>
  }
}

// CHECK:      %[[ROWS:.*]] = sched.view %{{.*}} : !sched.buffer<ddr, 1x4x4x8xf16> -> !sched.buffer<ddr, 16x8xf16> loc("/fc1/MatMul")
// CHECK-NOT:  sched.copy
// CHECK:      sched.dma tile 0 %[[ROWS]] [0, 0] -> %{{.*}} [0, 0] box [16, 8]
// CHECK:      sched.fc tile 0 {{.*}} act gelu {{.*}} : !sched.buffer<ocm, 16x8xf16>, !sched.buffer<ocm, 12x8xf16>, !sched.buffer<ocm, 12xf32> -> !sched.buffer<ocm, 16x12xf16> loc("/fc1/MatMul")
// CHECK-NEXT: sched.dma tile 0 %{{.*}} [0, 0] -> %[[OUT:.*]] [0, 0] box [16, 12]
// CHECK-NEXT: sched.view %[[OUT]] : !sched.buffer<ddr, 16x12xf16> -> !sched.buffer<ddr, 1x4x4x12xf16> loc("/fc1/MatMul")
// CHECK-NOT:  sched.copy
