func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> attributes {llvm.emit_c_interface} {
return %a : tensor<3xf32>
}
