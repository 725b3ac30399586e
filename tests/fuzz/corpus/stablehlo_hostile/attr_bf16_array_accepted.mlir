func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
%0 = "chlo.erf"(%a) {v = array<bf16: 1.0>} : (tensor<3xf32>) -> tensor<3xf32>
return %0 : tensor<3xf32>
}
