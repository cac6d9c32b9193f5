// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' --print-debuginfo --split-input-file | filecheck %s
// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2},sched-allocate,convert-sched-to-mlip' --split-input-file | mrvl-opt --split-input-file | filecheck %s --check-prefix=ISA

// A softmax over the channel axis of an NHWC tensor (axis 3: the rows are the pixels, the
// reduced axis innermost) is cut into pieces of whole outer slices, one per tile: each loads
// its box of the [outer, length, inner] view, one sched.softmax, one store. A softmax over a
// middle axis (H of NHWC: outer N = 1, length H = 4, inner W*C = 6) keeps the reduced axis in
// the middle: no data is moved to make it innermost; the instruction takes the inner extent.

builtin.module {
  func.func @channels(%x: tensor<2x2x3x8xf16, #mrvl.layout<NHWC>>) -> tensor<2x2x3x8xf16, #mrvl.layout<NHWC>> {
    %0 = mrvl.softmax %x axes [3] : tensor<2x2x3x8xf16, #mrvl.layout<NHWC>> loc("/sm/Softmax")
    %1 = mrvl.layout_convert %0 : tensor<2x2x3x8xf16, #mrvl.layout<NHWC>> -> tensor<2x2x3x8xf16, #mrvl.layout<NHWC>> loc("/out")
    func.return %1 : tensor<2x2x3x8xf16, #mrvl.layout<NHWC>>
  }
}

// -----

builtin.module {
  func.func @middle(%x: tensor<1x4x3x2xf16, #mrvl.layout<NHWC>>) -> tensor<1x4x3x2xf16, #mrvl.layout<NHWC>> {
    %0 = mrvl.softmax %x axes [1] : tensor<1x4x3x2xf16, #mrvl.layout<NHWC>> loc("/mid/Softmax")
    %1 = mrvl.layout_convert %0 : tensor<1x4x3x2xf16, #mrvl.layout<NHWC>> -> tensor<1x4x3x2xf16, #mrvl.layout<NHWC>> loc("/out")
    func.return %1 : tensor<1x4x3x2xf16, #mrvl.layout<NHWC>>
  }
}

// CHECK-LABEL: symbol("channels")
// CHECK:      %[[OUT:.*]] = sched.alloc : !sched.buffer<ddr, 2x2x3x8xf16> loc("/sm/Softmax")
// CHECK:      %[[DST:.*]] = sched.view %[[OUT]] : !sched.buffer<ddr, 2x2x3x8xf16> -> !sched.buffer<ddr, 12x8x1xf16>
// CHECK:      %[[L0:.*]] = sched.dma tile 0 %{{.*}} [0, 0, 0] -> %{{.*}} [0, 0, 0] box [6, 8, 1]
// CHECK:      %[[S0:.*]] = sched.softmax tile 0 %{{.*}} -> %[[Y0:.*]] after(%[[L0]]) : !sched.buffer<ocm, 6x8x1xf16> -> !sched.buffer<ocm, 6x8x1xf16> loc("/sm/Softmax")
// CHECK-NEXT: sched.dma tile 0 %[[Y0]] [0, 0, 0] -> %[[DST]] [0, 0, 0] box [6, 8, 1] after(%[[S0]])
// CHECK:      sched.dma tile 1 %{{.*}} [6, 0, 0] -> %{{.*}} [0, 0, 0] box [6, 8, 1]
// CHECK:      sched.softmax tile 1

// CHECK-LABEL: symbol("middle")
// CHECK:      sched.view %{{.*}} : !sched.buffer<ddr, 1x4x3x2xf16> -> !sched.buffer<ddr, 1x4x6xf16>
// CHECK:      sched.dma tile 0 %{{.*}} [0, 0, 0] -> %{{.*}} [0, 0, 0] box [1, 4, 3]
// CHECK:      sched.softmax tile 0 %{{.*}} -> %{{.*}} after(%{{.*}}) : !sched.buffer<ocm, 1x4x3xf16> -> !sched.buffer<ocm, 1x4x3xf16> loc("/mid/Softmax")
// CHECK:      sched.dma tile 1 %{{.*}} [0, 0, 3] -> %{{.*}} [0, 0, 0] box [1, 4, 3]
// CHECK:      sched.softmax tile 1

// ISA:      mlip.softmax tile 0 signal {{[0-9]+}} wait [{{[0-9]+}}] : in_addr {{[0-9]+}}, out_addr {{[0-9]+}}, outer 6, length 8, inner 1
// ISA:      mlip.softmax tile 1 signal {{[0-9]+}} wait [{{[0-9]+}}] : in_addr {{[0-9]+}}, out_addr {{[0-9]+}}, outer 6, length 8, inner 1
// ISA:      mlip.softmax tile 0 signal {{[0-9]+}} wait [{{[0-9]+}}] : in_addr {{[0-9]+}}, out_addr {{[0-9]+}}, outer 1, length 4, inner 3
