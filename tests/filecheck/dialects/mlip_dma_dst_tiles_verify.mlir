// RUN: not mrvl-opt %s 2>&1 | filecheck %s

// An optional field comes after the required ones, by its name; another word there is
// reported at its line and column with the fields it could be.

builtin.module {
  mlip.dma tile 0 : src_space ddr, src_addr 0, src_strides [0, 0, 0, 1], dst_space ocm, dst_addr 0, dst_strides [0, 0, 0, 1], box [1, 1, 1, 4], elem_bytes 1, dst_tile 3
}
// CHECK: mlip_dma_dst_tiles_verify.mlir:7:{{[0-9]+}}
// CHECK: 'dst_tile' is not an optional field of dma here (optional fields, in this order: dst_tiles)
