"""Pytrees: tuples, lists, dicts (keys sorted, as JAX does), namedtuples and None, nested.
Anything else is a leaf. Flattening also yields each leaf's path, for error messages."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


@dataclass(frozen=True)
class TreeDef:
    kind: str            # "leaf", "none", "tuple", "list", "dict", "namedtuple"
    meta: Any            # dict keys, or the namedtuple class
    children: tuple      # child TreeDefs

    @property
    def num_leaves(self) -> int:
        if self.kind == "leaf":
            return 1
        return sum(c.num_leaves for c in self.children)

    def __str__(self):
        if self.kind == "leaf":
            return "*"
        if self.kind == "none":
            return "None"
        inner = ", ".join(str(c) for c in self.children)
        if self.kind == "dict":
            return "{" + ", ".join(f"{k!r}: {c}" for k, c in zip(self.meta, self.children)) + "}"
        if self.kind == "list":
            return f"[{inner}]"
        if self.kind == "namedtuple":
            return f"{self.meta.__name__}({inner})"
        return f"({inner}{',' if len(self.children) == 1 else ''})"


LEAF = TreeDef("leaf", None, ())


def dict_keys(d: dict) -> list:
    """A dict's keys in the order its values are flattened: sorted (by type name, then value)."""
    return sorted(d, key=lambda k: (type(k).__name__, k))


def _children(x) -> tuple[str, Any, list, list[str]] | None:
    """(kind, meta, children, path suffixes) of a container, or None for a leaf."""
    if x is None:
        return "none", None, [], []
    if isinstance(x, tuple) and hasattr(type(x), "_fields"):
        return "namedtuple", type(x), list(x), [f".{f}" for f in type(x)._fields]
    if isinstance(x, tuple):
        return "tuple", None, list(x), [f"[{i}]" for i in range(len(x))]
    if isinstance(x, list):
        return "list", None, list(x), [f"[{i}]" for i in range(len(x))]
    if isinstance(x, dict):
        keys = dict_keys(x)
        return "dict", tuple(keys), [x[k] for k in keys], [f"[{k!r}]" for k in keys]
    return None


def tree_flatten_with_path(x, path: str = "") -> tuple[list, list[str], TreeDef]:
    node = _children(x)
    if node is None:
        return [x], [path], LEAF
    kind, meta, children, suffixes = node
    leaves, paths, defs = [], [], []
    for c, s in zip(children, suffixes):
        l, p, d = tree_flatten_with_path(c, path + s)
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


def tree_flatten(x) -> tuple[list, TreeDef]:
    leaves, _, tree = tree_flatten_with_path(x)
    return leaves, tree


def tree_unflatten(tree: TreeDef, leaves) -> Any:
    it = iter(leaves)
    out = _build(tree, it)
    return out


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
    return tree.meta(*children)


def tree_map(f: Callable, x, *rest):
    leaves, tree = tree_flatten(x)
    others = [tree_flatten(r)[0] for r in rest]
    return tree_unflatten(tree, [f(*xs) for xs in zip(leaves, *others)])
