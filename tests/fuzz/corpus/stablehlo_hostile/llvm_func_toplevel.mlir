llvm.func @evil() {
  llvm.return
}
func.func @main(%a: tensor<f32>) -> tensor<f32> {
return %a : tensor<f32>
}
