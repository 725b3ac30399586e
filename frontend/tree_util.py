"""`sprue.tree_util`: sprue.pytree under jax.tree_util's name (`from sprue import tree_util`)."""
from sprue import pytree
from sprue.pytree import *  # noqa: F401,F403

__all__ = pytree.__all__
