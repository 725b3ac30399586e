"""sprue.scipy: the parts of scipy's API that jax.scipy has, over sprue.numpy (linalg, special)."""
from __future__ import annotations

from sprue.scipy import linalg, special  # noqa: F401
