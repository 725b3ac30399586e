func.func @main() -> tensor<2xi1> {
%0 = stablehlo.constant dense_resource<b> : tensor<2xi1>
return %0 : tensor<2xi1>
}
{-#
  dialect_resources: {
    builtin: {
      b: "0x010000000102"
    }
  }
#-}
