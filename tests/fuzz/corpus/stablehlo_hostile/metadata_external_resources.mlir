func.func @main(%a: tensor<f32>) -> tensor<f32> {
return %a : tensor<f32>
}
{-#
  external_resources: {
    mlir_reproducer: {
      pipeline: "builtin.module(canonicalize)"
    }
  }
#-}
