// RUN: not mrvl-opt %s 2>&1 | filecheck %s

// A fused activation is one of the ISA's activations, written as a word.

func.func @f(%x: tensor<1x16xf16, #mrvl.layout<NC>>, %w: tensor<10x16xf16, #mrvl.layout<OI>>) {
  %y = mrvl.fc %x, %w act swish : (tensor<1x16xf16, #mrvl.layout<NC>>, tensor<10x16xf16, #mrvl.layout<OI>>) -> tensor<1x10xf16, #mrvl.layout<NC>>
  func.return
}
// CHECK: mrvl_activation_word.mlir:6:{{[0-9]+}}
// CHECK: Expected `relu`, `clip`, `leaky_relu`, `prelu`, `sigmoid`, `tanh`, `hard_sigmoid`, `hard_swish`, `silu`, `mish`, `gelu`, `gelu_tanh`, `erf`, `exp`, `log`, `sqrt`, `reciprocal`, `abs`, `pow`, or `leaky_floor`.
