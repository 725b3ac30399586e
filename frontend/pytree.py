"""jax.tree_util's surface, as a public module (`sprue.pytree`; `sprue.tree_util` is the same, for
code written `from jax import tree_util`): pytrees are tuples, lists, dicts (keys sorted), named
tuples, None (a node without leaves) and the classes registered here, nested; anything else is a
leaf. A registered class can be a qjit'd function's argument or result.

    @sprue.pytree.register_dataclass
    @dataclasses.dataclass
    class Params:
        w: np.ndarray
        b: np.ndarray
        name: str = dataclasses.field(default="layer", metadata=dict(static=True))

The functions are defined in sprue.base.pytree (every layer flattens pytrees)."""
from sprue.base.pytree import (
    TreeDef,
    register_dataclass,
    register_pytree_node,
    register_pytree_node_class,
    tree_all,
    tree_flatten,
    tree_leaves,
    tree_map,
    tree_reduce,
    tree_structure,
    tree_unflatten,
)

PyTreeDef = TreeDef   # jax.tree_util's name for a structure

__all__ = ["PyTreeDef", "register_dataclass", "register_pytree_node", "register_pytree_node_class", "tree_all",
           "tree_flatten", "tree_leaves", "tree_map", "tree_reduce", "tree_structure", "tree_unflatten"]
