// RUN: mrvl-opt %s -p 'convert-mrvl-to-sched{mcpu=cn10ka num-tiles=2},sched-allocate,sched-insert-sync,convert-sched-to-mlip' --print-debuginfo | filecheck %s

// A slice with a negative step (a reverse-direction LSTM's time axis) is a strided copy with
// a negative source stride: its offset is the first element copied, the last of the axis.
// The DMA walks the source backwards (the ISA's `dma` allows negative strides); the
// destination is dense. The outermost dimension is cut across the tiles as usual.

builtin.module {
  func.func @region(%x: tensor<2x7x8xf32, #mrvl.layout<NCW>>) -> tensor<2x7x8xf32, #mrvl.layout<NCW>> {
    %h = mrvl.cast %x : tensor<2x7x8xf32, #mrvl.layout<NCW>> -> tensor<2x7x8xf16, #mrvl.layout<NCW>>
    %0 = mrvl.strided_copy %h offset 48 strides [56, -8, 1] box [2, 7, 8] : tensor<2x7x8xf16, #mrvl.layout<NCW>> -> tensor<2x7x8xf16, #mrvl.layout<NCW>> loc("/reverse/Slice")
    %y = mrvl.cast %0 : tensor<2x7x8xf16, #mrvl.layout<NCW>> -> tensor<2x7x8xf32, #mrvl.layout<NCW>>
    func.return %y : tensor<2x7x8xf32, #mrvl.layout<NCW>>
  }
}

// CHECK:      mlip.dma tile 0 {{.*}}: src_space ddr, src_addr [[A:[0-9]+]], src_strides [0, 112, -16, 2], dst_space ddr, dst_addr [[B:[0-9]+]], dst_strides [0, 112, 16, 2], box [1, 1, 7, 8], elem_bytes 2 loc("/reverse/Slice")
// CHECK-NEXT: mlip.dma tile 1 {{.*}}: src_space ddr, src_addr {{[0-9]+}}, src_strides [0, 112, -16, 2], {{.*}} box [1, 1, 7, 8], elem_bytes 2 loc("/reverse/Slice")
