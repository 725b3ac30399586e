func.func @main(%a: tensor<3xf32> {llvm.noalias}) -> tensor<3xf32> {
return %a : tensor<3xf32>
}
