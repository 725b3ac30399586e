// StableHLO interpreter conformance case case__0
// From https://github.com/openxla/stablehlo/blob/3c9301c116f97fbaf696959a0ede32712aec587b/stablehlo/tests/interpret/case.mlir, case 0 (`// -----` chunk, 0-based), function @case_negative_index_default.
// Rewritten: the check.* ops are removed and the checked values are returned.
// Copyright The StableHLO Authors. Licensed under the Apache License 2.0 (../LICENSE.stablehlo).

func.func @main() -> (tensor<9223372036854775807xi16>, tensor<9223372036854775807xi16>) {
  %index = stablehlo.constant dense<-1> : tensor<i32>
  %result_branch0 = stablehlo.constant dense<0> : tensor<9223372036854775807xi16>
  %result_branch1 = stablehlo.constant dense<1> : tensor<9223372036854775807xi16>
  %result0, %result1 = "stablehlo.case"(%index) ({
    stablehlo.return %result_branch0, %result_branch0 : tensor<9223372036854775807xi16>, tensor<9223372036854775807xi16>
  }, {
    stablehlo.return %result_branch1, %result_branch1 : tensor<9223372036854775807xi16>, tensor<9223372036854775807xi16>
  }) : (tensor<i32>) -> (tensor<9223372036854775807xi16>, tensor<9223372036854775807xi16>)
  func.return %result0, %result1 : tensor<9223372036854775807xi16>, tensor<9223372036854775807xi16>
}
