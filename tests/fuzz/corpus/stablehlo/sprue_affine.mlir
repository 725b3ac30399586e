#loc = loc(unknown)
module {
  func.func @main(%arg0: tensor<3xf64> loc(unknown), %arg1: tensor<3xf64> loc(unknown)) -> tensor<3xf64> {
    %cst = stablehlo.constant dense<[1.500000e+00, -0.000000e+00, 2.000000e+00]> : tensor<3xf64> loc(#loc)
    %0 = stablehlo.sine %arg0 : tensor<3xf64> loc(#loc2)
    %1 = stablehlo.multiply %0, %arg1 : tensor<3xf64> loc(#loc3)
    %2 = stablehlo.add %1, %cst : tensor<3xf64> loc(#loc4)
    return %2 : tensor<3xf64> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc1 = loc("/work/main/tests/fuzz/make_corpus.py":48:0)
#loc2 = loc("sin"(#loc1))
#loc3 = loc("mul"(#loc1))
#loc4 = loc("add"(#loc1))
