// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cnf10kb num-tiles=2 wb-pin-ocm=true}' | filecheck %s
// RUN: not mrvl-opt %s -p 'convert-mrvl-to-sched{num-tiles=2}' 2>&1 | filecheck %s --check-prefix=NO-MCPU
// RUN: not mrvl-opt %s -p 'convert-mrvl-to-sched' 2>&1 | filecheck %s --check-prefix=NONE
// RUN: not mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cnf10kb num-tiles=8}' 2>&1 | filecheck %s --check-prefix=TILES
// RUN: not mrvl-opt %s -p 'sched-allocate' 2>&1 | filecheck %s --check-prefix=NO-PROGRAM

// The target, the tile count and the options become the typed properties of one sched.program
// holding the schedule; nothing defaults to a target, and a sched pass on a module without a
// program says so.

builtin.module {
  func.func @r(%x: tensor<1x4xf32, #mrvl.layout<NC>>) -> tensor<1x4xf16, #mrvl.layout<NC>> {
    %0 = mrvl.cast %x : tensor<1x4xf32, #mrvl.layout<NC>> -> tensor<1x4xf16, #mrvl.layout<NC>> loc("/c")
    func.return %0 : tensor<1x4xf16, #mrvl.layout<NC>>
  }
}

// CHECK:      builtin.module {
// CHECK-NEXT:   sched.program mcpu("cnf10kb") tiles(2) symbol("r") wb_pin_ocm {
// CHECK-NEXT:     sched.io "x" input

// NO-MCPU: convert-mrvl-to-sched needs the option mcpu (the target the region is scheduled for)
// NONE: convert-mrvl-to-sched needs the options mcpu and num-tiles
// TILES: num_tiles=8 is not valid for cnf10kb (1, 2, 4 or 8, at most {{[0-9]}})
// NO-PROGRAM: expected one sched.program in the module (run convert-mrvl-to-sched), found 0
