func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
%e = tensor.empty() : tensor<3xf32>
return %e : tensor<3xf32>
}
