"""Tracebacks end in the user's code (issue 23): an error raised while a qjit'd function traces (or
make_jaxpr) leaves sprue's public entry without sprue's own frames, as JAX filters its internal
frames; SPRUE_TRACEBACK=full keeps them. Run as a script, so the traceback is Python's own print."""
import os
import subprocess
import sys

import pytest

SCRIPT = '''
import numpy as np, sprue, sprue.numpy as jnp

def layer(x):
    return jnp.reshape(x, (4, 4))

@sprue.qjit
def f(x):
    return layer(x) * 2

{call}
'''


@pytest.mark.parametrize("call", ["f(np.ones(3))", "sprue.make_jaxpr(f.fn)(np.ones(3))",
                                  "f(x=np.ones(3))", "sprue.grad(lambda x: jnp.sum(f.fn(x)))(np.ones(3))"])
@pytest.mark.parametrize("mode", ["", "full"])
def test_user_errors_show_the_users_frames(call, mode, tmp_path):
    script = tmp_path / "user_program.py"
    script.write_text(SCRIPT.format(call=call))
    env = {**os.environ, "SPRUE_TRACEBACK": mode, "SPRUE_CACHE_DIR": "off"}
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 1
    frames = [line.strip() for line in proc.stderr.splitlines() if line.strip().startswith("File ")]
    users = [f for f in frames if "user_program.py" in f]
    assert [f.rsplit(", in ", 1)[1] for f in users if "lambda" not in f] == ["<module>", "f", "layer"]
    assert "cannot reshape f64[3] (size 3) into shape (4, 4)" in proc.stderr
    if mode == "full":
        assert len(frames) > len(users) and "SPRUE_TRACEBACK=full shows them" not in proc.stderr
    else:
        assert frames == users
        assert "(sprue's internal frames are left out of this traceback; SPRUE_TRACEBACK=full shows them)" \
            in proc.stderr
