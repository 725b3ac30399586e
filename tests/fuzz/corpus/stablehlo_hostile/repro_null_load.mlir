func.func @main(%a: tensor<3xf32>) -> tensor<3xf32> {
%p = llvm.mlir.zero : !llvm.ptr
%v = llvm.load %p : !llvm.ptr -> f32
%t = tensor.from_elements %v, %v, %v : tensor<3xf32>
return %t : tensor<3xf32>
}
