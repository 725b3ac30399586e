"""sprue.scipy: the parts of scipy's API that jax.scipy has, over sprue.numpy (so far: linalg)."""
from __future__ import annotations

from sprue.scipy import linalg  # noqa: F401
