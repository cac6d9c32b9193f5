// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' --print-debuginfo | filecheck %s
// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2},sched-allocate,convert-sched-to-mlip' | mrvl-opt | filecheck %s --check-prefix=ISA

// A layer normalization of [1, 6, 8] over its last axis is cut into bands of whole rows, one
// per tile (rows of the [rows, length] view of the tensor): each loads the f32 scale and shift
// of a row and its rows, runs one sched.layernorm and stores its rows. It selects to one
// mlip.layernorm per band, with the epsilon as an f32 field.

builtin.module {
  func.func @region(%x: tensor<1x6x8xf16, #mrvl.layout<NCW>>) -> tensor<1x6x8xf16, #mrvl.layout<NCW>> {
    %g = mrvl.constant "g" = dense<1.5> : tensor<8xf32> -> tensor<8xf32, #mrvl.layout<O>>
    %b = mrvl.constant "b" = dense<0.25> : tensor<8xf32> -> tensor<8xf32, #mrvl.layout<O>>
    %0 = mrvl.layernorm %x, %g, %b axes [2] epsilon 1.000000e-05 : (tensor<1x6x8xf16, #mrvl.layout<NCW>>, tensor<8xf32, #mrvl.layout<O>>, tensor<8xf32, #mrvl.layout<O>>) -> tensor<1x6x8xf16, #mrvl.layout<NCW>> loc("/ln/LayerNormalization")
    %1 = mrvl.layout_convert %0 : tensor<1x6x8xf16, #mrvl.layout<NCW>> -> tensor<1x6x8xf16, #mrvl.layout<NCW>> loc("/out")
    func.return %1 : tensor<1x6x8xf16, #mrvl.layout<NCW>>
  }
}

// CHECK:      %[[SRC:.*]] = sched.view %{{.*}} : !sched.buffer<ddr, 1x6x8xf16> -> !sched.buffer<ddr, 6x8xf16> loc("/ln/LayerNormalization")
// CHECK:      %[[DST:.*]] = sched.view %{{.*}} : !sched.buffer<ddr, 1x6x8xf16> -> !sched.buffer<ddr, 6x8xf16>
// CHECK:      %[[G0:.*]] = sched.dma tile 0 %{{.*}} [0] -> %[[GB:.*]] [0] box [8] : !sched.buffer<ddr, 8xf32>, !sched.buffer<ocm, 8xf32>
// CHECK:      %[[B0:.*]] = sched.dma tile 0 %{{.*}} [0] -> %{{.*}} [0] box [8] : !sched.buffer<ddr, 8xf32>, !sched.buffer<ocm, 8xf32>
// CHECK:      %[[X0:.*]] = sched.dma tile 0 %[[SRC]] [0, 0] -> %{{.*}} [0, 0] box [3, 8]
// CHECK:      %[[L0:.*]] = sched.layernorm tile 0 %{{.*}}, %[[GB]], %{{.*}} -> %[[Y0:.*]] epsilon 1.000000e-05 after(%[[G0]], %[[B0]], %[[X0]]) : !sched.buffer<ocm, 3x8xf16>, !sched.buffer<ocm, 8xf32>, !sched.buffer<ocm, 8xf32> -> !sched.buffer<ocm, 3x8xf16> loc("/ln/LayerNormalization")
// CHECK-NEXT: sched.dma tile 0 %[[Y0]] [0, 0] -> %[[DST]] [0, 0] box [3, 8] after(%[[L0]])
// CHECK:      sched.dma tile 1 %[[SRC]] [3, 0] -> %{{.*}} [0, 0] box [3, 8]
// CHECK:      sched.layernorm tile 1
// CHECK:      -> %[[DST]] [3, 0] box [3, 8]

// ISA:      mlip.layernorm tile 0 signal {{[0-9]+}} wait [{{.*}}] : in_addr {{[0-9]+}}, out_addr {{[0-9]+}}, rows 3, length 8, g_addr {{[0-9]+}}, b_addr {{[0-9]+}}, eps 9.999999747378752e-06
// ISA:      mlip.layernorm tile 1
