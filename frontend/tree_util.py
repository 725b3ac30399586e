"""`sprue.tree_util`: sprue.pytree under jax.tree_util's name (`from sprue import tree_util`)."""
from sprue.pytree import (
    PyTreeDef,
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

__all__ = ["PyTreeDef", "register_dataclass", "register_pytree_node", "register_pytree_node_class", "tree_all",
           "tree_flatten", "tree_leaves", "tree_map", "tree_reduce", "tree_structure", "tree_unflatten"]
