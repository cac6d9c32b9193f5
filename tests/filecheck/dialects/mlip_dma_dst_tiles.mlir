// RUN: mrvl-opt %s --print-debuginfo | filecheck %s
// RUN: mrvl-opt %s --print-debuginfo | mrvl-opt --print-debuginfo | filecheck %s

// dma's last field, dst_tiles (a multicast's bit mask of destination tiles), is optional: it
// prints only when it is not 0, after the required fields, and parses back unchanged. Written
// as 0 it vanishes, so every dma without a multicast prints as before the field existed.

builtin.module attributes {mlip.program = #mlip.program<target = "cn10ka", tiles = 4, ddr_size = 256, const_base = 0>} {
  mlip.consts dense<"0x0000803F"> : tensor<4xui8>
  mlip.dma tile 1 signal 1 : src_space ddr, src_addr 0, src_strides [0, 0, 0, 1], dst_space ocm, dst_addr 64, dst_strides [0, 0, 0, 1], box [1, 1, 1, 4], elem_bytes 1, dst_tiles 11 loc("/conv/Conv")
  mlip.dma tile 2 signal 2 : src_space ddr, src_addr 0, src_strides [0, 0, 0, 1], dst_space ocm, dst_addr 64, dst_strides [0, 0, 0, 1], box [1, 1, 1, 4], elem_bytes 1, dst_tiles 0 loc("/conv/Conv")
  mlip.dma tile 0 signal 3 : src_space ddr, src_addr 0, src_strides [0, 0, 0, 1], dst_space ocm, dst_addr 64, dst_strides [0, 0, 0, 1], box [1, 1, 1, 4], elem_bytes 1 loc("/conv/Conv")
  mlip.end tile 0
}

// CHECK:      mlip.dma tile 1 signal 1 : src_space ddr, src_addr 0, src_strides [0, 0, 0, 1], dst_space ocm, dst_addr 64, dst_strides [0, 0, 0, 1], box [1, 1, 1, 4], elem_bytes 1, dst_tiles 11 loc("/conv/Conv")
// CHECK-NEXT: mlip.dma tile 2 signal 2 : src_space ddr, src_addr 0, src_strides [0, 0, 0, 1], dst_space ocm, dst_addr 64, dst_strides [0, 0, 0, 1], box [1, 1, 1, 4], elem_bytes 1 loc("/conv/Conv")
// CHECK-NEXT: mlip.dma tile 0 signal 3 : src_space ddr, src_addr 0, src_strides [0, 0, 0, 1], dst_space ocm, dst_addr 64, dst_strides [0, 0, 0, 1], box [1, 1, 1, 4], elem_bytes 1 loc("/conv/Conv")
// CHECK-NEXT: mlip.end tile 0
