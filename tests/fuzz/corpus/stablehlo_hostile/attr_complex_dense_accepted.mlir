func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
%0 = "chlo.erf"(%a) {v = [dense<(1.0, 2.0)> : tensor<complex<f32>>]} : (tensor<3xf32>) -> tensor<3xf32>
return %0 : tensor<3xf32>
}
