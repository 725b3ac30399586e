func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
%r = llvm.inline_asm has_side_effects "movl $$1, $0", "=r" : () -> i32
return %a : tensor<3xf32>
}
