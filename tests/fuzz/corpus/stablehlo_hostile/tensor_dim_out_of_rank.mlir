func.func @main(%a: tensor<?xf32>) -> tensor<i64> {
%c = arith.constant 1 : index
%d = tensor.dim %a, %c : tensor<?xf32>
%i = arith.index_cast %d : index to i64
%t = tensor.from_elements %i : tensor<i64>
return %t : tensor<i64>
}
