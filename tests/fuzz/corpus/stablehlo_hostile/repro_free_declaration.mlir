func.func private @free(tensor<3xf32>) -> tensor<3xf32>
func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
%0 = func.call @free(%a) : (tensor<3xf32>) -> tensor<3xf32>
return %0 : tensor<3xf32>
}
