// RUN: not mrvl-opt %s -p 'sched-plan-tiling{mcpu=cnf10kb num-tiles=4}' 2>&1 | filecheck %s
// RUN: not mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cnf10kb num-tiles=4}' 2>&1 | filecheck %s

// A plan written by hand whose pieces do not fit a tile's OCM is a compile error naming the
// layer, in sched-plan-tiling and in convert-mrvl-to-sched: here whole 64x64 planes of 64
// channels at once on a cnf10kb tile (128 KiB).

builtin.module {
  func.func @big(%x: tensor<1x64x64x64xf16, #mrvl.layout<NHWC>>) -> tensor<1x32x32x64xf16, #mrvl.layout<NHWC>> {
    %y = mrvl.maxpool2d %x kernel [2, 2] strides [2, 2] {sched.plan = #sched.window_plan<ocs = 64, rows = 32, cols = 32, cbs = 0, split = "dealt", strided = 0>} : tensor<1x64x64x64xf16, #mrvl.layout<NHWC>> -> tensor<1x32x32x64xf16, #mrvl.layout<NHWC>> loc("/big/MaxPool")
    func.return %y : tensor<1x32x32x64xf16, #mrvl.layout<NHWC>>
  }
}

// CHECK: mrvl-opt: error: layer /big/MaxPool: its plan #sched.window_plan<ocs = 64, rows = 32, cols = 32, cbs = 0, split = "dealt", strided = 0>: does not fit on chip: one piece needs {{[0-9]+}} bytes of OCM, a tile has 131072
