"""Pytrees: tuples, lists, dicts (keys sorted, as JAX does; an OrderedDict in its order, a defaultdict
with its default_factory), namedtuples, None (a node without
children) and the classes registered as nodes (register_pytree_node, as jax.tree_util's), nested.
Anything else is a leaf. Flattening also yields each leaf's path, for error messages."""
from __future__ import annotations

import collections
import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, Callable

from sprue.base.errors import SprueTypeError, SprueValueError


@dataclass(frozen=True)
class TreeDef:
    kind: str            # "leaf", "none", "tuple", "list", "dict", "odict", "ddict", "namedtuple", "custom"
    meta: Any            # dict keys, (default_factory, keys), the namedtuple class, or (registered class, aux data)
    children: tuple      # child TreeDefs

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    @property
    def num_nodes(self) -> int:
        return 1 + sum(c.num_nodes for c in self.children)

    def unflatten(self, leaves):
        """jax's PyTreeDef.unflatten: the tree of this structure holding `leaves`."""
        return tree_unflatten(self, leaves)

    def flatten_up_to(self, tree) -> list:
        """The subtrees of `tree` where this structure has leaves (this structure must be a prefix of
        tree's)."""
        return _up_to(self, tree, "")

    def __str__(self):
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        inner = ", ".join(str(c) for c in self.children)
        if self.kind in ("dict", "odict", "ddict"):
            keys = self.meta[1] if self.kind == "ddict" else self.meta
            inner = "{" + ", ".join(f"{k!r}: {c}" for k, c in zip(keys, self.children)) + "}"
            return inner if self.kind == "dict" else f"{'OrderedDict' if self.kind == 'odict' else 'defaultdict'}({inner})"
        if self.kind == "list":
            return f"[{inner}]"
        if self.kind == "namedtuple":
            return f"{self.meta.__name__}({inner})"
        if self.kind == "custom":
            return f"{self.meta[0].__name__}({inner})"
        return f"({inner}{',' if len(self.children) == 1 else ''})"


LEAF = TreeDef("leaf", None, ())


def dict_keys(d: dict) -> list:
    """A dict's keys in the order its values are flattened: sorted (by type name, then value)."""
    return sorted(d, key=lambda k: (type(k).__name__, k))


# -- registered classes (jax.tree_util's register_pytree_node) ---------------------------------------
# type -> (flatten(x) -> (children, aux), unflatten(aux, children) -> x, child names or None)
_REGISTRY: dict[type, tuple[Callable, Callable, tuple[str, ...] | None]] = {}
_BUILTIN = (tuple, list, dict, type(None), collections.OrderedDict, collections.defaultdict)


def register_pytree_node(nodetype: type, flatten_func: Callable, unflatten_func: Callable,
                         child_names: tuple[str, ...] | None = None) -> None:
    """Make `nodetype` a pytree node: `flatten_func(x)` gives (children, aux_data), with hashable
    aux_data; `unflatten_func(aux_data, children)` rebuilds it. As jax.tree_util's."""
    if not isinstance(nodetype, type):
        raise SprueTypeError(f"register_pytree_node: expected a class, got {type(nodetype).__name__}")
    if not callable(flatten_func) or not callable(unflatten_func):
        raise SprueTypeError(f"register_pytree_node({nodetype.__name__}): flatten_func and unflatten_func must be"
                             f" functions")
    if nodetype in _BUILTIN or nodetype in _REGISTRY:
        raise SprueValueError(f"register_pytree_node: {nodetype.__name__} is already a pytree node type (a type is"
                              f" registered once)")
    _REGISTRY[nodetype] = (flatten_func, unflatten_func, child_names)


def register_pytree_node_class(cls: type) -> type:
    """A class decorator: `cls.tree_flatten(self)` and the classmethod `cls.tree_unflatten(aux, children)`."""
    if not hasattr(cls, "tree_flatten") or not hasattr(cls, "tree_unflatten"):
        raise SprueTypeError(f"register_pytree_node_class({getattr(cls, '__name__', cls)!r}): the class needs a"
                             f" tree_flatten method and a tree_unflatten classmethod")
    register_pytree_node(cls, lambda x: x.tree_flatten(), cls.tree_unflatten)
    return cls


def register_dataclass(nodetype: type, data_fields=None, meta_fields=None, drop_fields=()) -> type:
    """A dataclass as a pytree node: `data_fields` are its children, `meta_fields` (hashable) its
    structure; without either, fields declared with `field(metadata=dict(static=True))` are meta,
    the others data (as jax.tree_util.register_dataclass)."""
    if not dataclasses.is_dataclass(nodetype):
        if data_fields is None or meta_fields is None:
            raise SprueTypeError(f"register_dataclass({getattr(nodetype, '__name__', nodetype)!r}): a class that is"
                                 f" not a dataclass needs data_fields and meta_fields")
    elif data_fields is None and meta_fields is None:
        fields = [f for f in dataclasses.fields(nodetype) if f.init and f.name not in drop_fields]
        meta_fields = [f.name for f in fields if f.metadata.get("static", False)]
        data_fields = [f.name for f in fields if not f.metadata.get("static", False)]
    elif data_fields is None or meta_fields is None:
        raise SprueTypeError(f"register_dataclass({nodetype.__name__}): give both data_fields and meta_fields, or"
                             f" neither")
    data, meta = tuple(data_fields), tuple(meta_fields)
    if dataclasses.is_dataclass(nodetype):
        init = {f.name for f in dataclasses.fields(nodetype) if f.init} - set(drop_fields)
        if set(data) | set(meta) != init or set(data) & set(meta):
            raise SprueValueError(f"register_dataclass({nodetype.__name__}): data_fields {list(data)} and meta_fields"
                                  f" {list(meta)} must name each of its fields ({sorted(init)}) once")

    def flatten(x):
        return [getattr(x, n) for n in data], tuple(getattr(x, n) for n in meta)

    def unflatten(aux, children):
        return nodetype(**dict(zip(data, children)), **dict(zip(meta, aux)))
    register_pytree_node(nodetype, flatten, unflatten, data)
    return nodetype


def node_flattener(t: type) -> Callable | None:
    """The flatten function of a registered class (None for any other type)."""
    entry = _REGISTRY.get(t)
    return None if entry is None else entry[0]


def _custom(x, entry) -> tuple[str, Any, list, list[str]]:
    flatten, _, names = entry
    children, aux = flatten(x)
    children = list(children)
    try:
        hash(aux)
    except TypeError:
        raise SprueTypeError(f"{type(x).__name__}'s pytree flatten gave auxiliary data of type {type(aux).__name__},"
                             f" which is not hashable: a pytree's structure is compared and hashed (make it a tuple)"
                             ) from None
    suffixes = [f".{n}" for n in names] if names and len(names) == len(children) else \
        [f"[{i}]" for i in range(len(children))]
    return "custom", (type(x), aux), children, suffixes


def _children(x) -> tuple[str, Any, list, list[str]] | None:
    """(kind, meta, children, path suffixes) of a container, or None for a leaf."""
    entry = _REGISTRY.get(type(x))
    if entry is not None:
        return _custom(x, entry)
    if x is None:
        return "none", None, [], []
    if isinstance(x, tuple) and hasattr(type(x), "_fields"):
        return "namedtuple", type(x), list(x), [f".{f}" for f in type(x)._fields]
    if isinstance(x, tuple):
        return "tuple", None, list(x), [f"[{i}]" for i in range(len(x))]
    if isinstance(x, list):
        return "list", None, list(x), [f"[{i}]" for i in range(len(x))]
    if isinstance(x, dict):
        if type(x) is collections.OrderedDict:   # as JAX: insertion order, rebuilt as an OrderedDict
            keys = list(x)
            return "odict", tuple(keys), [x[k] for k in keys], [f"[{k!r}]" for k in keys]
        keys = dict_keys(x)
        if type(x) is collections.defaultdict:   # sorted keys; rebuilt with its default_factory
            return "ddict", (x.default_factory, tuple(keys)), [x[k] for k in keys], [f"[{k!r}]" for k in keys]
        return "dict", tuple(keys), [x[k] for k in keys], [f"[{k!r}]" for k in keys]
    return None


def tree_flatten_with_path(x, path: str = "", is_leaf: Callable | None = None) -> tuple[list, list[str], TreeDef]:
    node = None if is_leaf is not None and is_leaf(x) else _children(x)
    if node is None:
        return [x], [path], LEAF
    kind, meta, children, suffixes = node
    leaves, paths, defs = [], [], []
    for c, s in zip(children, suffixes):
        l, p, d = tree_flatten_with_path(c, path + s, is_leaf)
        leaves += l
        paths += p
        defs.append(d)
    return leaves, paths, TreeDef(kind, meta, tuple(defs))


def none_paths(x, path: str = "") -> list[str]:
    """The paths of the Nones in a pytree (empty nodes: tree_flatten yields no leaf for them), for
    messages; a dict's values are named by key (`d['a']`)."""
    out, stack = [], [(x, path)]
    while stack:
        node, p = stack.pop()
        if node is None:
            out.append(p)
            continue
        kids = _children(node)
        if kids is not None:
            stack.extend(reversed(list(zip(kids[2], (p + s for s in kids[3])))))
    return out


def tree_flatten(x, is_leaf: Callable | None = None) -> tuple[list, TreeDef]:
    leaves, _, tree = tree_flatten_with_path(x, "", is_leaf)
    return leaves, tree


def tree_leaves(x, is_leaf: Callable | None = None) -> list:
    return tree_flatten(x, is_leaf)[0]


def tree_structure(x, is_leaf: Callable | None = None) -> TreeDef:
    return tree_flatten(x, is_leaf)[1]


def tree_unflatten(tree: TreeDef, leaves) -> Any:
    if not isinstance(tree, TreeDef):
        raise SprueTypeError(f"tree_unflatten: expected a tree structure (from tree_flatten or tree_structure), got"
                             f" {type(tree).__name__}")
    leaves = list(leaves)
    if len(leaves) != tree.num_leaves:
        raise SprueValueError(f"tree_unflatten: the structure {tree} has {tree.num_leaves} leaves, got"
                              f" {len(leaves)}")
    return _build(tree, iter(leaves))


def _build(tree: TreeDef, it):
    if tree.kind == "leaf":
        return next(it)
    if tree.kind == "none":
        return None
    children = [_build(c, it) for c in tree.children]
    if tree.kind == "tuple":
        return tuple(children)
    if tree.kind == "list":
        return children
    if tree.kind == "dict":
        return dict(zip(tree.meta, children))
    if tree.kind == "odict":
        return collections.OrderedDict(zip(tree.meta, children))
    if tree.kind == "ddict":
        return collections.defaultdict(tree.meta[0], zip(tree.meta[1], children))
    if tree.kind == "custom":
        cls, aux = tree.meta
        entry = _REGISTRY.get(cls)
        if entry is None:
            raise SprueTypeError(f"{cls.__name__} is not registered as a pytree node in this process (register it"
                                 f" before rebuilding trees of it)")
        return entry[1](aux, children)
    return tree.meta(*children)


def _up_to(tree: TreeDef, x, path: str) -> list:
    """The subtrees of x at the leaves of `tree` (a prefix of x's structure)."""
    if tree.kind == "leaf":
        return [x]
    node = _children(x)
    kind, meta, children, suffixes = node if node is not None else ("leaf", None, [], [])
    if kind != tree.kind or meta != tree.meta or len(children) != len(tree.children):
        got = str(tree_structure(x))
        raise SprueValueError(f"the tree{' at ' + path if path else ''} has structure {got}, where {tree} was"
                              f" expected (trees given together must have the first one's structure, or extend it)")
    out = []
    for t, c, s in zip(tree.children, children, suffixes):
        out += _up_to(t, c, path + s)
    return out


def tree_map(f: Callable, x, *rest, is_leaf: Callable | None = None):
    """f applied to the leaves of x and the matching subtrees of the trees in rest (as jax.tree_util:
    each of rest has x's structure, or one that extends it)."""
    leaves, tree = tree_flatten(x, is_leaf)
    others = [_up_to(tree, r, f"argument {i + 1}") for i, r in enumerate(rest)]
    return tree_unflatten(tree, [f(*xs) for xs in zip(leaves, *others)])


def tree_all(x, is_leaf: Callable | None = None) -> bool:
    return all(tree_leaves(x, is_leaf))


_NO_INITIAL = object()


def tree_reduce(function: Callable, x, initializer=_NO_INITIAL, is_leaf: Callable | None = None):
    leaves = tree_leaves(x, is_leaf)
    return functools.reduce(function, leaves) if initializer is _NO_INITIAL else \
        functools.reduce(function, leaves, initializer)
