func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
%0 = "chlo.erf"(%a) {w = dense_resource<blob1> : tensor<3xf32>} : (tensor<3xf32>) -> tensor<3xf32>
return %0 : tensor<3xf32>
}
{-#
  dialect_resources: {
    builtin: {
      blob1: "0x040000000000803F0000803F0000803F"
    }
  }
#-}
