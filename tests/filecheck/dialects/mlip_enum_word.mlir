// RUN: not mrvl-opt %s 2>&1 | filecheck %s

// An enumeration field takes one of its words, and the error lists them.

builtin.module {
  mlip.add tile 0 : a_addr 0, b_addr 32, out_addr 64, count 16, channels 0, act swish, act_a 0.0, act_b 0.0, act_addr -1
}
// CHECK: mlip_enum_word.mlir:6:{{[0-9]+}}
// CHECK: act: 'swish' is not a Activation (none, relu, clip, leaky_relu, prelu, sigmoid, tanh, hard_sigmoid, hard_swish, silu, mish, gelu, gelu_tanh, erf, exp, log, sqrt, reciprocal, abs, pow, leaky_floor)
