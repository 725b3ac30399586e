"""Ahead-of-time compilation at decoration (issue 22, as Catalyst's `aot_compile`): a function whose
parameters are all annotated, or which takes none, is compiled when decorated; a failure then is a
warning naming the error and its line, and the call raises it. Un-annotated functions compile
nothing when decorated."""
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import sprue
import sprue.numpy as jnp
from sprue.errors import AheadOfTimeWarning

HERE = r"test_ahead_of_time\.py:\d+"


def test_a_function_without_parameters_is_compiled_when_decorated():
    @sprue.qjit
    def table():
        return jnp.cumsum(jnp.arange(5.0)) * 2.0

    assert table.compile_count == 1
    assert "cumsum" in str(table.jaxpr) and "stablehlo" in table.mlir   # before any call
    np.testing.assert_allclose(table(), np.cumsum(np.arange(5.0)) * 2.0)
    np.testing.assert_allclose(table(), np.cumsum(np.arange(5.0)) * 2.0)
    assert table.compile_count == 1


def test_an_annotated_function_is_compiled_when_decorated():
    @sprue.qjit
    def scale(x: sprue.f64["n"], k: float):  # noqa: F821
        return x * k

    assert scale.compile_count == 1 and "f64[" in str(scale.jaxpr) and "func.func" in scale.mlir
    np.testing.assert_allclose(scale(np.arange(3.0), 2.5), np.arange(3.0) * 2.5)
    assert scale.compile_count == 1


def test_a_failure_is_reported_at_decoration_and_at_the_call():
    with pytest.warns(AheadOfTimeWarning) as record:
        @sprue.qjit
        def bad(x: sprue.f64[3]):
            return x + jnp.ones(4)       # shapes (3,) and (4,) do not broadcast
    text = str(record[0].message)
    assert re.search(r"qjit\(bad\): ahead-of-time \(AOT\) compilation at decoration failed \(every parameter is annotated", text), text
    assert re.search(r"\(3,\).*\(4,\)|f64\[3\].*f64\[4\]", text) and re.search(HERE, text), text
    assert record[0].filename == __file__
    with pytest.raises(sprue.SprueValueError, match=r"bad\.jaxpr is not available: compiling bad at decoration"
                                                    r" failed"):
        bad.jaxpr
    with pytest.raises(sprue.SprueError) as info:   # again at the call, with the line
        bad(np.ones(3))
    assert re.search(HERE, str(info.value)) and str(info.value) in text


def test_a_python_error_names_its_line_and_a_later_definition_is_found_at_the_call():
    with pytest.warns(AheadOfTimeWarning, match=r"qjit\(main\): .*it takes no parameters.*NameError: name"
                                                r" 'helper_defined_later' is not defined \(at .*" + HERE):
        @sprue.qjit
        def main():
            return helper_defined_later(2.0)  # noqa: F821

    globals()["helper_defined_later"] = lambda x: jnp.sqrt(x)
    try:
        assert main() == np.sqrt(2.0) and main.compile_count == 1
    finally:
        del globals()["helper_defined_later"]


def test_unannotated_and_static_functions_compile_nothing_when_decorated():
    @sprue.qjit
    def f(x):
        return x * 2.0

    @sprue.qjit(static_argnums=0)
    def g(n: int):
        return jnp.ones(n)

    assert f.compile_count == 0 and g.compile_count == 0
    with pytest.raises(sprue.SprueValueError, match=r"f\.jaxpr is not available yet: call the function once"):
        f.jaxpr


def test_a_parameter_annotated_as_a_string_warns_and_one_annotated_for_documentation_does_not(recwarn):
    """Catalyst tries every fully annotated function at decoration and warns when it fails
    (`x: str`); sprue compiles only its own hints then, warns where an annotation says the parameter
    cannot be an argument at all, and raises at the call with JAX's words too."""
    with pytest.warns(AheadOfTimeWarning, match=r"qjit\(label\): ahead-of-time \(AOT\) compilation at decoration"
                                                r" failed .*parameter 'name' is annotated str, which a compiled"
                                                r" function cannot take .*static_argnames='name'"):
        @sprue.qjit
        def label(name: str, x: float):
            return x
    assert label.compile_count == 0
    with pytest.raises(sprue.SprueTypeError, match=r"argument 'name': str is not a valid argument; expected an array"
                                                   r" .*\(<class 'str'> is not a valid JAX type\)"):
        label("abc", 1.0)

    recwarn.clear()

    @sprue.qjit
    def documented(x: np.ndarray, k: int):   # annotated for readers: compiled at the call, silently
        return x * k

    @sprue.qjit(static_argnames="name")
    def static_label(name: str, x: float):   # a static string is fine
        return x * len(name)
    assert not recwarn.list and documented.compile_count == 0
    np.testing.assert_allclose(documented(np.arange(3.0), 2), np.arange(3.0) * 2)
    assert static_label("abc", 2.0) == 6.0


def test_inside_a_trace_compilation_waits_for_the_call():
    @sprue.qjit
    def outer(x):
        @sprue.qjit
        def inner():
            return x * 3.0               # closes over the outer trace's value
        assert inner.compile_count == 0
        return inner()

    np.testing.assert_allclose(outer(np.arange(3.0)), np.arange(3.0) * 3.0)


def test_importing_a_module_of_unannotated_functions_compiles_and_loads_no_compiler(tmp_path):
    """Decorating costs no compilation: importing 300 decorated functions neither compiles nor loads
    the lowering (MLIR, llvmlite)."""
    body = "\n".join(f"@sprue.qjit\ndef f{i}(x, y):\n    return jnp.sin(x) * y + {i}\n" for i in range(300))
    (tmp_path / "many_kernels.py").write_text("import sprue\nimport sprue.numpy as jnp\n\n" + body)
    probe = textwrap.dedent("""
        import sys, time
        t = time.perf_counter()
        import many_kernels
        took = time.perf_counter() - t
        assert all(getattr(many_kernels, f"f{i}").compile_count == 0 for i in range(300))
        loaded = sorted(m for m in sys.modules if m.startswith(("sprue.lowering", "mlir", "llvmlite")))
        assert not loaded, loaded
        print(took)
    """)
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) < 5.0, out.stdout   # ~0.05 s measured; a compilation would take seconds
