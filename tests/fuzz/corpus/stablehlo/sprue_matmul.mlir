#loc = loc(unknown)
module {
  func.func @main(%arg0: tensor<2x3xf64> loc(unknown), %arg1: tensor<3x4xf64> loc(unknown)) -> tensor<4x2xf64> {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<2x3xf64>, tensor<3x4xf64>) -> tensor<2x4xf64> loc(#loc2)
    %1 = stablehlo.tanh %0 : tensor<2x4xf64> loc(#loc3)
    %2 = stablehlo.transpose %1, dims = [1, 0] : (tensor<2x4xf64>) -> tensor<4x2xf64> loc(#loc4)
    return %2 : tensor<4x2xf64> loc(#loc)
  } loc(#loc)
} loc(#loc)
#loc1 = loc("/work/main/tests/fuzz/make_corpus.py":54:0)
#loc2 = loc("dot_general"(#loc1))
#loc3 = loc("tanh"(#loc1))
#loc4 = loc("transpose"(#loc1))
