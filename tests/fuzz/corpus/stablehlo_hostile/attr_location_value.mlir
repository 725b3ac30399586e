func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
%0 = "chlo.erf"(%a) {v = loc("x.py":1:2)} : (tensor<3xf32>) -> tensor<3xf32>
return %0 : tensor<3xf32>
}
