func.func @main() -> tensor<3xf32> {
%0 = stablehlo.constant dense_resource<blob1> : tensor<3xf32>
return %0 : tensor<3xf32>
}
{-#
  dialect_resources: {
    builtin: {
      blob1: "0x03000000000000000000000000000000"
    }
  }
#-}
