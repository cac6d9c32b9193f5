// `mrvlc --emit` of a QDQ model (onnxruntime's quantize_static of qdq_models.small_cnn): every
// stage shows which layers are int8. mrvl and sched: i8 tensors and buffers, the i32 bias and
// requantization pairs; mlip (and asm, the same text): the int8 instructions and 1-byte DMAs; json: the layers'
// "dtype" and their int8 / int32 constants.
// RUN: python %S/../inputs/small_qdq.py %t.onnx
// RUN: mrvlc %t.onnx --emit mrvl | filecheck %s --check-prefix=MRVL
// RUN: mrvlc %t.onnx --emit sched | filecheck %s --check-prefix=SCHED
// RUN: mrvlc %t.onnx --emit mlip | filecheck %s --check-prefix=MLIP
// RUN: mrvlc %t.onnx --emit json | filecheck %s --check-prefix=JSON

// MRVL:      mrvl.quantize %{{.*}} quant <{{.*}}> : tensor<1x16x16x3xf32, #mrvl.layout<NHWC>> -> tensor<1x16x16x3xi8, #mrvl.layout<NHWC>>
// MRVL:      mrvl.conv2d {{.*}} in_quant [#mrvl.quant<{{.*}}>] out_quant <{{.*}}> weight_scales [{{.*}}] : (tensor<1x16x16x3xi8, #mrvl.layout<NHWC>>, tensor<8x3x3x3xi8, #mrvl.layout<OHWI>>, tensor<8xi32, #mrvl.layout<O>>) -> tensor<1x16x16x8xi8, #mrvl.layout<NHWC>> loc("/conv1/Conv")
// MRVL:      mrvl.add {{.*}} : tensor<1x16x16x8xi8, #mrvl.layout<NHWC>> loc("/add/Add")
// MRVL:      mrvl.dequantize {{.*}} -> tensor<1x10xf32

// SCHED:     sched.qconv2d tile 0 {{.*}} : !sched.buffer<ocm, {{[0-9x]+}}xi8>, !sched.buffer<ocm, 8x3x3x3xi8>, !sched.buffer<ocm, 8x2xi32>, bias !sched.buffer<ocm, 8xi32> -> !sched.buffer<ocm, {{[0-9x]+}}xi8>
// SCHED:     sched.dequantize {{.*}} : !sched.buffer<ddr, 1x10xi8>, !sched.buffer<ddr, 1x10xf32>

// MLIP:      mlip.quant tile 0 {{.*}} src_dtype f32
// MLIP:      mlip.dma {{.*}} box [8, 3, 3, 3], elem_bytes 1
// MLIP:      mlip.qconv tile 0 {{.*}} in_zp {{.*}} out_zp {{.*}} rq_addr
// MLIP:      mlip.dequant

// JSON:      "layer_name": [
// JSON-NEXT:  "input"
// JSON:      "dtype": [
// JSON-NEXT:  "float32"
// JSON:      "dtype": [
// JSON-NEXT:  "int8"
// JSON:      "kernel_const": {
// JSON:       "dtype": "int8",
// JSON:      "bias_const": {
// JSON:       "dtype": "int32",
