"""lowering/masked_stores.keep_stores_unmasked: an array updated in place under a mask
(`store (select m, x, (load p)), p`) reads its load through a freeze, so LLVM's code generator
keeps a blend and a plain store instead of a masked store (microcoded on AMD's Zen 1-3), and
the code still computes the same."""
import ctypes

import numpy as np
from llvmlite import binding as llvm

from sprue.lowering import backend
from sprue.lowering.masked_stores import keep_stores_unmasked

# a[i] = b[i] > 0 ? b[i] : a[i], four lanes, as the loop vectorizer leaves such an update
_UPDATE = """define void @update(ptr %a, ptr %b) {
  %old = load <4 x double>, ptr %a, align 8
  %new = load <4 x double>, ptr %b, align 8
  %m = fcmp ogt <4 x double> %new, zeroinitializer
  %v = select <4 x i1> %m, <4 x double> %new, <4 x double> %old
  store <4 x double> %v, ptr %a, align 8
  ret void
}
"""


def test_the_loaded_operand_of_an_in_place_select_is_frozen():
    out = keep_stores_unmasked(_UPDATE)
    assert "%sprue.unmasked.0 = freeze <4 x double> %old" in out
    assert "select <4 x i1> %m, <4 x double> %new, <4 x double> %sprue.unmasked.0" in out
    assert out.index("freeze") > out.index("%old = load") and out.index("freeze") < out.index("select")
    llvm.parse_assembly(out).verify()


def test_a_select_stored_elsewhere_is_left_alone():
    other = _UPDATE.replace("(ptr %a, ptr %b)", "(ptr %a, ptr %b, ptr %c)").replace(
        "store <4 x double> %v, ptr %a", "store <4 x double> %v, ptr %c")
    assert keep_stores_unmasked(other) is other


def test_the_code_has_no_masked_store_and_computes_the_same():
    # the host's CPU: on AVX targets LLVM would otherwise emit vmaskmovpd
    code = backend.codegen(_UPDATE, asm=True)
    assert "maskmov" not in code.asm
    mod = llvm.parse_assembly(keep_stores_unmasked(_UPDATE))
    engine = llvm.create_mcjit_compiler(mod, llvm.Target.from_default_triple().create_target_machine())
    engine.finalize_object()
    update = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(engine.get_function_address("update"))
    a, b = np.array([1.0, 2.0, 3.0, 4.0]), np.array([-1.0, 5.0, -2.0, 6.0])
    want = np.where(b > 0, b, a)
    update(a.ctypes.data, b.ctypes.data)
    np.testing.assert_array_equal(a, want)
