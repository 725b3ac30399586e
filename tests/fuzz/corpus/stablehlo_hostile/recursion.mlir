func.func private @f(%a: tensor<f32>) -> tensor<f32> {
  %0 = func.call @f(%a) : (tensor<f32>) -> tensor<f32>
  return %0 : tensor<f32>
}
func.func @main(%a: tensor<f32>) -> tensor<f32> {
%0 = func.call @f(%a) : (tensor<f32>) -> tensor<f32>
return %0 : tensor<f32>
}
