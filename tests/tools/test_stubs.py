"""Typed API (issue 23): sprue ships py.typed and stubs (tools/stubs.py: sprue's own written by hand,
sprue.numpy's, sprue.lax's, ... generated), kept current here; `mypy --strict` accepts a user's
program that uses the API, sees through qjit to the wrapped function's parameters, and rejects a
call with the wrong arguments (so the check can fail)."""
import ast
import inspect
import os
import sys
from pathlib import Path

import pytest

import sprue
from sprue.tools import stubs

mypy_api = pytest.importorskip("mypy.api", reason="mypy is not installed (pip install .[test] installs it)")

USER = '''
import numpy as np

import sprue
import sprue.numpy as jnp
from sprue import lax


@sprue.qjit
def predict(w: sprue.Array, x: sprue.Array, scale: float = 1.0) -> sprue.Array:
    h = jnp.tanh(x @ w) * scale
    return lax.fori_loop(0, 3, lambda i, v: v * 0.5, h)


@sprue.qjit(static_argnums=1)
def power(x: sprue.Array, n: int) -> sprue.Array:
    return jnp.sum(x ** n)


loss = sprue.grad(lambda w, x: jnp.sum(predict(w, x) ** 2))
out: sprue.Array = predict(np.ones((3, 3)), np.ones((2, 3)), scale=2.0)
total = power(np.arange(3.0), 2)
g = loss(np.ones((3, 3)), np.ones((2, 3)))
key = sprue.random.PRNGKey(0)
noise = sprue.random.normal(key, (3,))
sprue.debug.print("{}", noise)
count: int = predict.compile_count
'''
WRONG = USER + "predict(np.ones((3, 3)), np.ones((2, 3)), scale='big', extra=1)\n"


def _package_tree(root: Path) -> Path:
    """sprue as an installed package lays it out (pyproject.toml maps the repository's folders
    onto it), made of symbolic links: what mypy reads in a checkout's editable install."""
    pkg = root / "sprue"
    pkg.mkdir(parents=True)
    for entry in (stubs.REPO / "frontend").iterdir():
        (pkg / entry.name).symlink_to(entry)
    for folder in ("lowering", "runtime", "tools", "cmake"):
        (pkg / folder).symlink_to(stubs.REPO / folder)
    return root


def _mypy(tmp_path: Path, source: str) -> tuple[str, int]:
    user = tmp_path / "user_program.py"
    user.write_text(source)
    tree = _package_tree(tmp_path / "site")
    env_path = os.environ.get("MYPYPATH")
    os.environ["MYPYPATH"] = str(tree)
    try:
        out, err, status = mypy_api.run(["--strict", "--follow-imports=silent", "--no-incremental",
                                         "--python-executable", sys.executable, str(user)])
    finally:
        if env_path is None:
            os.environ.pop("MYPYPATH", None)
        else:
            os.environ["MYPYPATH"] = env_path
    return out + err, status


def test_stubs_are_current():
    for path, text in stubs.stubs().items():
        assert path.read_text() == text, f"{path.name} is stale: run `python -m sprue.tools.stubs`"
    assert (stubs.REPO / "frontend" / "py.typed").is_file()


def test_hand_written_stub_has_sprues_parameters():
    tree = ast.parse((stubs.REPO / stubs.TOP_STUB).read_text())
    declared = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    for name in ("qjit", "grad", "value_and_grad", "vmap", "jacfwd", "jacrev", "hessian", "jvp", "vjp", "load", "save"):
        stub = declared[name]
        params = [a.arg for a in stub.args.posonlyargs + stub.args.args + stub.args.kwonlyargs]
        runtime = [p.name for p in inspect.signature(getattr(sprue, name)).parameters.values()
                   if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)]
        assert params == runtime, name


def test_mypy_strict_accepts_a_users_program(tmp_path):
    report, status = _mypy(tmp_path, USER)
    assert status == 0, report


def test_mypy_sees_through_qjit_to_the_parameters(tmp_path):
    report, status = _mypy(tmp_path, WRONG)
    assert status == 1
    assert 'Argument "scale" to "__call__" of "QJIT" has incompatible type "str"; expected "float"' in report
    assert 'Unexpected keyword argument "extra" for "__call__" of "QJIT"' in report
