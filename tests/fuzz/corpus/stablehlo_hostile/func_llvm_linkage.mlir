func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> attributes {llvm.linkage = #llvm.linkage<weak>} {
return %a : tensor<3xf32>
}
