"""lowering/inplace.fold_whole_slices: a slice covering a whole tensor of run-time size is that
tensor, also where the size is known only by following the tensor back through the slices
inserted into it, expand/collapse_shape and the loops that carry it (a packed product's C:
matmul.py), and not where a loop yields a new tensor of another size."""
import pytest
from torch_mlir import ir

from sprue.lowering import dialects
from sprue.lowering.inplace import fold_whole_slices

# C (n x 16) written in place by a loop over it, seen as (n, 2, 8) panels and collapsed back; the
# slice [0, 0] [n, 16] of the result is all of it
_CARRIED = """
func.func @f(%c: tensor<?x16xf64>, %v: tensor<1x8xf64>, %m: index) -> tensor<?x16xf64> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = tensor.dim %c, %c0 : tensor<?x16xf64>
  %e = tensor.expand_shape %c [[0], [1, 2]] output_shape [%n, 2, 8] : tensor<?x16xf64> into tensor<?x2x8xf64>
  %r = scf.for %i = %c0 to %m step %c1 iter_args(%acc = %e) -> (tensor<?x2x8xf64>) {
    %w = tensor.insert_slice %v into %acc[%i, 0, 0] [1, 1, 8] [1, 1, 1] : tensor<1x8xf64> into tensor<?x2x8xf64>
    scf.yield %w : tensor<?x2x8xf64>
  }
  %back = tensor.collapse_shape %r [[0], [1, 2]] : tensor<?x2x8xf64> into tensor<?x16xf64>
  %all = tensor.extract_slice %back[0, 0] [%n, 16] [1, 1] : tensor<?x16xf64> to tensor<?x16xf64>
  return %all : tensor<?x16xf64>
}
"""


@pytest.fixture
def ctx():
    with ir.Context() as c:
        dialects.load()
        yield c


def _folded(text: str) -> bool:
    module = ir.Module.parse(text)
    fold_whole_slices(module)
    assert module.operation.verify()
    return "tensor.extract_slice" not in str(module)


def test_a_slice_of_all_of_a_tensor_carried_by_a_loop_folds(ctx):
    assert _folded(_CARRIED)


def test_a_loop_that_yields_a_new_tensor_keeps_the_slice(ctx):
    # the loop yields a fresh tensor of size %m: its size is not the init's
    fresh = _CARRIED.replace(
        "    %w = tensor.insert_slice %v into %acc[%i, 0, 0] [1, 1, 8] [1, 1, 1] : tensor<1x8xf64> into tensor<?x2x8xf64>\n",
        "    %w = tensor.empty(%m) : tensor<?x2x8xf64>\n")
    assert not _folded(fresh)


def test_a_slice_of_fewer_rows_keeps_the_slice(ctx):
    assert not _folded(_CARRIED.replace("%back[0, 0] [%n, 16]", "%back[0, 0] [%m, 16]"))
