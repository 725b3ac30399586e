func.func @main() -> tensor<i32> {
%c = stablehlo.constant dense<0> : tensor<i32>
%0 = stablehlo.while(%it = %c) : tensor<i32>
cond {
  %c10 = stablehlo.constant dense<10> : tensor<i32>
  %p = stablehlo.compare LT, %it, %c10, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
  stablehlo.return %p : tensor<i1>
} do {
  %z = llvm.mlir.zero : !llvm.ptr
  stablehlo.return %it : tensor<i32>
}
return %0 : tensor<i32>
}
