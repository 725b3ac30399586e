func.func @main(%a: tensor<f32>) -> tensor<f32> {
%i = arith.constant 1 : i32
%j = arith.addi %i, %i : i32
return %a : tensor<f32>
}
