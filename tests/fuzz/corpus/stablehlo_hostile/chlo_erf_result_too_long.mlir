func.func @main(%a: tensor<3xf32>) -> tensor<100xf32> {
%0 = "chlo.erf"(%a) : (tensor<3xf32>) -> tensor<100xf32>
return %0 : tensor<100xf32>
}
