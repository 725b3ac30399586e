func.func @main(%a: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xui8>, tensor<2xi1>) {
%w = stablehlo.constant dense_resource<weights> : tensor<3xf32>
%0 = stablehlo.multiply %a, %w : tensor<3xf32>
%u = stablehlo.constant dense_resource<"odd \22key\22"> : tensor<3xui8>
%b = stablehlo.constant dense_resource<flags> : tensor<2xi1>
return %0, %u, %b : tensor<3xf32>, tensor<3xui8>, tensor<2xi1>
}
{-#
  dialect_resources: {
    builtin: {
      weights: "0x100000000000C03F000000C000005040",
      "odd \22key\22": "0x010000000007FF",
      flags: "0x010000000100"
    }
  }
#-}
