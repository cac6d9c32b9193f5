// RUN: mrvl-opt %s -p mrvl-fold-qdq,mrvl-verify-int8 | filecheck %s

// mrvl-verify-int8 checks the fold against the partition's report (the module's
// `mrvl.int8_nodes`): every op of an int8 node computes on int8 tensors. YOLOv8n's box
// decoding: a rank-3 Add imports as reshape -> add -> reshape, and the next layer views its
// result at rank 4 again, so its quantize reads two reshapes; the quantize moves before both
// to fold into the add. The float reshapes of the region's inputs, which feed only
// quantizes, are the layer's edge (exact in any precision) and pass.

builtin.module attributes {mrvl.int8_nodes = ["/detect/Add_2"]} {
  func.func @box_add(%a: tensor<1x2x8xf32, #mrvl.layout<NCW>>, %b: tensor<1x2x8xf32, #mrvl.layout<NCW>>) -> tensor<1x2x8x1xi8, #mrvl.layout<NHWC>> {
    %ra = mrvl.reshape %a : tensor<1x2x8xf32, #mrvl.layout<NCW>> -> tensor<1x2x8x1xf32, #mrvl.layout<NHWC>> loc("/detect/Add_2")
    %qa = mrvl.quantize %ra quant <0.25, -3> : tensor<1x2x8x1xf32, #mrvl.layout<NHWC>> -> tensor<1x2x8x1xi8, #mrvl.layout<NHWC>>
    %da = mrvl.dequantize %qa quant <0.25, -3> : tensor<1x2x8x1xi8, #mrvl.layout<NHWC>> -> tensor<1x2x8x1xf32, #mrvl.layout<NHWC>>
    %rb = mrvl.reshape %b : tensor<1x2x8xf32, #mrvl.layout<NCW>> -> tensor<1x2x8x1xf32, #mrvl.layout<NHWC>> loc("/detect/Add_2")
    %qb = mrvl.quantize %rb quant <0.5, 0> : tensor<1x2x8x1xf32, #mrvl.layout<NHWC>> -> tensor<1x2x8x1xi8, #mrvl.layout<NHWC>>
    %db = mrvl.dequantize %qb quant <0.5, 0> : tensor<1x2x8x1xi8, #mrvl.layout<NHWC>> -> tensor<1x2x8x1xf32, #mrvl.layout<NHWC>>
    %s = mrvl.add %da, %db : tensor<1x2x8x1xf32, #mrvl.layout<NHWC>> loc("/detect/Add_2")
    %back = mrvl.reshape %s : tensor<1x2x8x1xf32, #mrvl.layout<NHWC>> -> tensor<1x2x8xf32, #mrvl.layout<NCW>> loc("/detect/Add_2")
    %view = mrvl.reshape %back : tensor<1x2x8xf32, #mrvl.layout<NCW>> -> tensor<1x2x8x1xf32, #mrvl.layout<NHWC>> loc("/detect/Div_1")
    %q = mrvl.quantize %view quant <0.75, 1> : tensor<1x2x8x1xf32, #mrvl.layout<NHWC>> -> tensor<1x2x8x1xi8, #mrvl.layout<NHWC>>
    func.return %q : tensor<1x2x8x1xi8, #mrvl.layout<NHWC>>
  }
}

// CHECK-LABEL: func.func @box_add
// CHECK:       %[[S:.*]] = mrvl.add %{{.*}}, %{{.*}} in_quant [#mrvl.quant<0.25, -3>, #mrvl.quant<0.5, 0>] out_quant <0.75, 1> : tensor<1x2x8x1xi8, #mrvl.layout<NHWC>>
// CHECK-NEXT:  %[[B:.*]] = mrvl.reshape %[[S]] : tensor<1x2x8x1xi8, #mrvl.layout<NHWC>> -> tensor<1x2x8xi8, #mrvl.layout<NCW>>
// CHECK-NEXT:  %[[V:.*]] = mrvl.reshape %[[B]] : tensor<1x2x8xi8, #mrvl.layout<NCW>> -> tensor<1x2x8x1xi8, #mrvl.layout<NHWC>>
// CHECK-NEXT:  func.return %[[V]]
