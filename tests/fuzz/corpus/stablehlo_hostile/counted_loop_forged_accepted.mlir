func.func @main() -> tensor<i64> {
%k0 = stablehlo.constant dense<2> : tensor<i64>
%n = stablehlo.constant dense<5> : tensor<i64>
%z = stablehlo.constant dense<0> : tensor<i64>
%0:2 = stablehlo.while(%k = %k0, %acc = %z) : tensor<i64>, tensor<i64> attributes {sprue.counted_loop}
cond {
  %p = stablehlo.compare LT, %k, %n, SIGNED : (tensor<i64>, tensor<i64>) -> tensor<i1>
  stablehlo.return %p : tensor<i1>
} do {
  %one = stablehlo.constant dense<1> : tensor<i64>
  %k1 = stablehlo.add %k, %one : tensor<i64>
  %s = stablehlo.add %acc, %k : tensor<i64>
  stablehlo.return %k1, %s : tensor<i64>, tensor<i64>
}
return %0#1 : tensor<i64>
}
