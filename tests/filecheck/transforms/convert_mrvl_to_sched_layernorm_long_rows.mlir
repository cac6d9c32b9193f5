// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2}' | filecheck %s
// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2},sched-allocate,convert-sched-to-mlip' | mrvl-opt | filecheck %s --check-prefix=ISA

// A layer normalization of [1, 4, 30000] over its last axis: a row with its result and its
// f32 scale and shift takes 360,000 bytes, more than a tile's 262,144, so it is not one
// sched.layernorm. Each tile takes two whole rows once (120,000 bytes) for a sched.lnstats
// (their f32 mean and rstd), then normalizes them in two runs of 15,000 columns, each run
// loading its scales, shifts and input for a sched.lnapply and storing its result.

builtin.module {
  func.func @region(%x: tensor<1x4x30000xf16, #mrvl.layout<NCW>>) -> tensor<1x4x30000xf16, #mrvl.layout<NCW>> {
    %g = mrvl.constant "g" = dense<1.5> : tensor<30000xf32> -> tensor<30000xf32, #mrvl.layout<O>>
    %b = mrvl.constant "b" = dense<0.25> : tensor<30000xf32> -> tensor<30000xf32, #mrvl.layout<O>>
    %0 = mrvl.layernorm %x, %g, %b axes [2] epsilon 1.000000e-05 : (tensor<1x4x30000xf16, #mrvl.layout<NCW>>, tensor<30000xf32, #mrvl.layout<O>>, tensor<30000xf32, #mrvl.layout<O>>) -> tensor<1x4x30000xf16, #mrvl.layout<NCW>>
    %1 = mrvl.layout_convert %0 : tensor<1x4x30000xf16, #mrvl.layout<NCW>> -> tensor<1x4x30000xf16, #mrvl.layout<NCW>>
    func.return %1 : tensor<1x4x30000xf16, #mrvl.layout<NCW>>
  }
}

// CHECK:      %[[SRC:.*]] = sched.view %{{.*}} : !sched.buffer<ddr, 1x4x30000xf16> -> !sched.buffer<ddr, 4x30000xf16>
// CHECK:      %[[DST:.*]] = sched.view %{{.*}} : !sched.buffer<ddr, 1x4x30000xf16> -> !sched.buffer<ddr, 4x30000xf16>
// CHECK:      %[[ST:.*]] = sched.alloc tile(0) : !sched.buffer<ocm, 2x2xf32>
// CHECK:      %[[X0:.*]] = sched.dma tile 0 %[[SRC]] [0, 0] -> %[[XB:.*]] [0, 0] box [2, 30000]
// CHECK:      %[[S0:.*]] = sched.lnstats tile 0 %[[XB]] -> %[[ST]] epsilon 1.000000e-05 after(%[[X0]]) : !sched.buffer<ocm, 2x30000xf16> -> !sched.buffer<ocm, 2x2xf32>
// CHECK:      %[[G0:.*]] = sched.dma tile 0 %{{.*}} [0] -> %[[GB:.*]] [0] box [15000] : !sched.buffer<ddr, 30000xf32>, !sched.buffer<ocm, 15000xf32>
// CHECK:      %[[B0:.*]] = sched.dma tile 0 %{{.*}} [0] -> %[[BB:.*]] [0] box [15000]
// CHECK:      %[[R0:.*]] = sched.dma tile 0 %[[SRC]] [0, 0] -> %[[RB:.*]] [0, 0] box [2, 15000]
// CHECK:      %[[A0:.*]] = sched.lnapply tile 0 %[[RB]], %[[ST]], %[[GB]], %[[BB]] -> %[[Y0:.*]] after(%[[S0]], %[[G0]], %[[B0]], %[[R0]])
// CHECK-NEXT: sched.dma tile 0 %[[Y0]] [0, 0] -> %[[DST]] [0, 0] box [2, 15000] after(%[[A0]])
// CHECK:      sched.dma tile 0 %{{.*}} [15000] -> %{{.*}} [0] box [15000]
// CHECK:      sched.dma tile 0 %[[SRC]] [0, 15000] -> %{{.*}} [0, 0] box [2, 15000]
// CHECK:      sched.lnapply tile 0
// CHECK:      -> %[[DST]] [0, 15000] box [2, 15000]
// CHECK:      sched.dma tile 1 %[[SRC]] [2, 0] -> %{{.*}} [0, 0] box [2, 30000]
// CHECK:      sched.lnstats tile 1
// CHECK-NOT:  sched.layernorm

// ISA:      mlip.lnstats tile 0 signal {{[0-9]+}} wait [{{.*}}] : in_addr {{[0-9]+}}, out_addr {{[0-9]+}}, rows 2, length 30000, eps 9.999999747378752e-06
// ISA:      mlip.lnapply tile 0 signal {{[0-9]+}} wait [{{.*}}] : in_addr {{[0-9]+}}, out_addr {{[0-9]+}}, stats_addr {{[0-9]+}}, rows 2, count 15000, g_addr {{[0-9]+}}, b_addr {{[0-9]+}}
// ISA:      mlip.lnstats tile 1
