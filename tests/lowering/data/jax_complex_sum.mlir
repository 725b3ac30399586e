module @jit_f attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%arg0: tensor<4xcomplex<f64>>, %arg1: tensor<4xf64>) -> (tensor<complex<f64>> {jax.result_info = "result[0]"}, tensor<4xf64> {jax.result_info = "result[1]"}, tensor<4xf64> {jax.result_info = "result[2]"}) {
    %0 = stablehlo.exponential %arg0 : tensor<4xcomplex<f64>>
    %1 = stablehlo.convert %arg1 : (tensor<4xf64>) -> tensor<4xcomplex<f64>>
    %2 = stablehlo.multiply %0, %1 : tensor<4xcomplex<f64>>
    %3 = stablehlo.real %arg0 : (tensor<4xcomplex<f64>>) -> tensor<4xf64>
    %4 = stablehlo.imag %arg0 : (tensor<4xcomplex<f64>>) -> tensor<4xf64>
    %5 = stablehlo.negate %4 : tensor<4xf64>
    %6 = stablehlo.complex %3, %5 : tensor<4xcomplex<f64>>
    %cst = stablehlo.constant dense<(0.000000e+00,2.000000e+00)> : tensor<complex<f64>>
    %7 = stablehlo.broadcast_in_dim %cst, dims = [] : (tensor<complex<f64>>) -> tensor<4xcomplex<f64>>
    %8 = stablehlo.multiply %6, %7 : tensor<4xcomplex<f64>>
    %9 = stablehlo.add %2, %8 : tensor<4xcomplex<f64>>
    %cst_0 = stablehlo.constant dense<(0.000000e+00,0.000000e+00)> : tensor<complex<f64>>
    %10 = stablehlo.reduce(%9 init: %cst_0) applies stablehlo.add across dimensions = [0] : (tensor<4xcomplex<f64>>, tensor<complex<f64>>) -> tensor<complex<f64>>
    %11 = stablehlo.abs %arg0 : (tensor<4xcomplex<f64>>) -> tensor<4xf64>
    %cst_1 = stablehlo.constant dense<2.000000e+00> : tensor<f64>
    %12 = stablehlo.broadcast_in_dim %cst_1, dims = [] : (tensor<f64>) -> tensor<4xf64>
    %13 = stablehlo.multiply %11, %12 : tensor<4xf64>
    %14 = stablehlo.real %arg0 : (tensor<4xcomplex<f64>>) -> tensor<4xf64>
    %15 = stablehlo.imag %arg0 : (tensor<4xcomplex<f64>>) -> tensor<4xf64>
    %16 = stablehlo.add %14, %15 : tensor<4xf64>
    return %10, %13, %16 : tensor<complex<f64>>, tensor<4xf64>, tensor<4xf64>
  }
}

