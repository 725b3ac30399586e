"""The compile driver: every way into sprue's compiler goes through here, the same way.

    read    a closed jaxpr -> StableHLO     lower_with_signature (lowering/stablehlo.py)
            a StableHLO module, checked     prepare_stablehlo (lowering/stablehlo_input.py)
    build   pipeline -> object -> link      build_shared_library (lowering/backend.py)
    load    sprue.runtime.load; or the library is written for C hosts

    compile_closed_jaxpr   qjit, sprue.load of a saved jaxpr: through the compile cache, loaded
    load_stablehlo         sprue.load of a StableHLO module (.mlir): loaded
    write_library          `sprue compile`: lib<name>.so (and any stage) written for C hosts

The compiler (sprue.lowering: MLIR through torch_mlir, and llvmlite) is imported in this module
only, at the first compilation (_lowering): loading it takes ~150 ms that a compile cache hit,
`import sprue` and `sprue --help` never pay. Nothing else above the lowering imports it
(tests/test_layers.py).
"""
from __future__ import annotations

import functools
import gc
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, Callable

import numpy as np

from sprue.api import compile_cache
from sprue.api.pickle_format import dumps as dump_payload
from sprue.api.pickle_format import loads as load_payload
from sprue.api.pickle_format import malformed, remember, remembered
from sprue.api.shape_functions import shape_function_of
from sprue.base import forks, timing
from sprue.base.errors import SprueValueError
from sprue.base.timing import step
from sprue.ir.core import ShapedArray, allocation_sites
from sprue.ir.shapes import dim as dim_of
from sprue.ir.shapes import dim_vars_of
from sprue.runtime import Signature, TensorSpec, load, save_signature
from sprue.runtime.build_folders import build_folder, folder_name
from sprue.runtime.function import Declarations

__all__ = ["ImplicitDim", "StableHLOFunction", "check_build_options", "compile_closed_jaxpr", "implicit_dims",
           "load_stablehlo", "lower_with_signature", "out_dir_for", "prepare_stablehlo", "size_of", "target_list",
           "toolchain", "unpickle_stablehlo", "write_library"]


@functools.cache
def _lowering() -> SimpleNamespace:
    """The lowering's modules the driver calls, imported at the first compilation, while a fork
    waits (sprue.base.forks)."""
    with forks.loading, step("import the compiler"), _collector_paused():
        # deferred: MLIR and llvmlite load with these (~100 ms), never on a cache hit, at import or for `sprue --help`
        from sprue.lowering import backend, stablehlo, stablehlo_input, targets
    return SimpleNamespace(backend=backend, stablehlo=stablehlo, stablehlo_input=stablehlo_input, targets=targets)


class _collector_paused:
    """Python's cyclic collector off while the compiler's modules load (under forks.loading, one
    thread at a time): their ~40,000 new objects, none of them garbage, set off full collections
    that walked the whole heap, 10-20 ms of a ~100 ms import."""

    def __enter__(self) -> None:
        self.was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc) -> None:
        if self.was_enabled:
            gc.enable()


def toolchain() -> ModuleType:
    """lowering/toolchain.py: `sprue doctor`'s probes of MLIR and LLVM, each on its own."""
    with forks.loading:
        from sprue.lowering import toolchain as probes  # deferred: as _lowering, and it must load without them
    return probes


# -- implicit size arguments -----------------------------------------------------------------------
@dataclass
class ImplicitDim:
    """A size passed as an implicit argument: read from the axes of the explicit arguments that
    carry it (all of which must agree)."""
    name: str
    sources: list[tuple[int, int]]   # (explicit leaf index, axis)


def implicit_dims(jaxpr, n_implicit: int) -> list[ImplicitDim]:
    """The first n_implicit invars of `jaxpr` (sizes), each with the axes of the other invars it sizes."""
    implicit = [ImplicitDim(v.dim.name, []) for v in jaxpr.invars[:n_implicit]]
    by_var = {v.dim: d for v, d in zip(jaxpr.invars[:n_implicit], implicit)}
    for leaf, v in enumerate(jaxpr.invars[n_implicit:]):
        for axis, d in enumerate(v.aval.shape):
            for dv in dim_vars_of(d):
                if dv in by_var and d == dim_of(dv):
                    by_var[dv].sources.append((leaf, axis))
    return implicit


def size_of(dim: ImplicitDim, leaves, paths, fn_name: str) -> int:
    """The value of the implicit size `dim` in a call with these explicit arguments."""
    size, first = None, None
    for leaf, axis in dim.sources:
        shape = np.shape(leaves[leaf])
        if len(shape) <= axis:
            raise SprueValueError(f"{fn_name}(): argument '{paths[leaf]}' has shape {shape}, but axis {axis}"
                                  f" should hold the size '{dim.name}'")
        if size is None:
            size, first = shape[axis], (leaf, axis)
        elif shape[axis] != size:
            raise SprueValueError(
                f"{fn_name}(): size mismatch for '{dim.name}': argument '{paths[first[0]]}' axis {first[1]} has"
                f" size {size}, but argument '{paths[leaf]}' axis {axis} has size {shape[axis]}")
    return size


# -- trace or read -> StableHLO --------------------------------------------------------------------
def _runtime_shape(aval: ShapedArray) -> tuple:
    return tuple(d if isinstance(d, int) else None for d in aval.shape)


def lower_with_signature(closed, name: str, arg_names: list[str], *, result_name: str = "result[{}]",
                static_sizes: bool = False, with_shape_function: bool = False,
                destinations: bool = False, into: str | None = None) -> tuple[str, Signature]:
    """The StableHLO module of a closed jaxpr (its function @name) and that function's runtime
    signature. With run-time checks (its own, or the entry checks of its sizes: all of them with
    `static_sizes`, for C callers), the function returns a status first. `result_name.format(i)`
    names result i. With `destinations`, the function returns nothing and takes its results'
    destinations after its arguments, the status's first (stablehlo.lower); `into` names such a
    function to add beside @name (its signature is @name's: the C header knows its ABI)."""
    jaxpr = closed.jaxpr
    lowered = _lowering().stablehlo.lower(closed, name=name, arg_names=arg_names, static_sizes=static_sizes,
                                          destinations=destinations, into=into)
    args = [TensorSpec(p, v.aval.dtype, _runtime_shape(v.aval)) for p, v in zip(arg_names, jaxpr.invars)]
    results = [TensorSpec(result_name.format(i), a.aval.dtype, _runtime_shape(a.aval))
               for i, a in enumerate(jaxpr.outvars)]
    if destinations:
        status = [TensorSpec("status", np.int64, ())] if lowered.has_status else []
        return lowered.text, Signature(args + status + results, [])
    sig = Signature(args, results, status_messages=lowered.check_messages if lowered.has_status else None,
                    shape_function=shape_function_of(jaxpr) if with_shape_function else None)
    return lowered.text, sig


def prepare_stablehlo(path_or_text, rename_to: str | None = None):
    """A StableHLO module read, checked and made ready for the pipeline (a PreparedModule: text,
    entry, signature), its entry function renamed `rename_to` when given."""
    return _lowering().stablehlo_input.prepare(path_or_text, rename_to)


def check_build_options(opt_level: int, cpu: str, features: str = "") -> None:
    """Raises for an optimization level, CPU or features the backend cannot build for."""
    _lowering().backend.check_codegen_options(opt_level, cpu, features)


def target_list() -> tuple[str, list[str], list[str]]:
    """(target triple, the CPU names --target-cpu accepts here, the feature names)."""
    targets = _lowering().targets
    table = targets.target_table()
    return table.triple, targets.usable_cpus(), table.features


# -- StableHLO -> library -> loaded ----------------------------------------------------------------
def out_dir_for(name: str, keep_intermediate) -> Path:
    """Where a compilation's files go: a scratch folder, or the kept-intermediates folder."""
    if keep_intermediate and not isinstance(keep_intermediate, bool):
        d = Path(keep_intermediate)
    elif keep_intermediate:
        d = Path.cwd() / "sprue_build" / folder_name(name)
    else:
        return build_folder(name)
    d.mkdir(parents=True, exist_ok=True)
    return d


def _explained(function, jaxpr):
    """`function` (the runtime's CompiledFunction) naming, when an allocation fails while it runs,
    the arrays of the jaxpr with that byte count and the source lines that make them."""
    function.explain_allocation = functools.partial(allocation_sites, jaxpr)
    return function


def compile_closed_jaxpr(closed, n_implicit: int, in_names: list[str], out_dir: Path, stem: str,
                         keep_intermediate: bool = False, *, opt_level: int = 3, cpu: str = "host",
                         **build_options):
    """Lower a closed jaxpr, build its shared library and load it (the path qjit and sprue.load
    share). The first n_implicit invars are implicit sizes, read at call time from the axes of the
    explicit arguments (named in_names). Returns (stablehlo text, library, function, implicit).

    The library comes from the compile cache (compile_cache.py) when an entry for this jaxpr,
    these names and build options exists (`opt_level`, `cpu` and any other keyword: all are
    passed to lowering/backend.py build_shared_library, and all are part of the cache key): then
    neither the MLIR bindings nor llvmlite are imported. Otherwise it is compiled into a new
    entry, or, with keep_intermediate or the cache off, into `out_dir` as `<stem>.so`."""
    jaxpr = closed.jaxpr
    implicit = implicit_dims(jaxpr, n_implicit)
    destinations = bool(build_options.pop("destinations", False))   # (a cache key's option, not the backend's)
    options = {"opt_level": opt_level, "cpu": cpu, **build_options}
    key_options = {**options, "destinations": True} if destinations else options
    again = functools.partial(compile_closed_jaxpr, closed, n_implicit, in_names, out_dir, stem + "_into",
                              keep_intermediate, opt_level=opt_level, cpu=cpu, destinations=True, **build_options)
    cache = None if keep_intermediate else compile_cache.default_cache()
    key = None
    if cache is not None:
        hit, key = _cached(cache, _cache_key(closed, n_implicit, in_names, key_options), stem)
        if hit is not None:
            return hit[0].stablehlo, hit[0].library, _writing_into(_explained(hit[1], jaxpr), again), implicit
        compile_cache.count("misses")
    names = [d.name for d in implicit] + list(in_names)
    with timing.profiled(stem):
        timing.describe(equations=len(closed.jaxpr.eqns))
        _lowering()   # imported here, so that a profile shows the import as its own step
        _lowering().backend.prepare_in_background(opt_level=opt_level, cpu=cpu,
                                                  features=build_options.get("features", ""))
        with step("jaxpr -> StableHLO"):
            text, sig = lower_with_signature(closed, "main", names, with_shape_function=not destinations,
                                             destinations=destinations)
        staging = _staging(cache, key, stem)
        declared: list[Declarations] = []
        def meanwhile() -> None:   # (while cc links)
            declared.append(Declarations(sig, "main"))
            declared[0].prepare(stem)

        if staging is None:
            library = _lowering().backend.build_shared_library(text, out_dir, name=stem, internal=["main"],
                                                               keep_intermediate=keep_intermediate,
                                                               meanwhile=meanwhile, **options)
            save_signature(library, sig, "main", stem)   # beside the library: sprue.runtime.load(library) needs no more
        else:
            library = _build_into_cache(cache, key, staging, text, sig, out_dir, stem, options, meanwhile)
        with step("load"):
            function = load(library, "main", sig, name=stem, declared=declared[0] if declared else None)
    function = _explained(function, jaxpr)
    return text, library, function if destinations else _writing_into(function, again), implicit


def _writing_into(function, compile_variant: Callable[[], tuple]):
    """`function` (the runtime's CompiledFunction) with its destination-passing variant, compiled
    at the first call with `out=` that can use it: the same program taking its results'
    destinations (lower_with_signature's `destinations`), which it computes in place."""
    function.destination_variant = functools.cache(lambda: compile_variant()[2])
    return function


def _cache_key(closed, n_implicit: int, in_names, options: dict) -> str | None:
    """The cache key of this compilation, or None when it cannot be cached (compile_cache.jaxpr_digest)."""
    components = compile_cache.key_components(closed, n_implicit, in_names, options)
    return None if components is None else compile_cache.key_of(components)


def _cached(cache, key: str | None, stem: str) -> tuple[Any, str | None]:
    """((entry, loaded function) from the cache, verified (sizes, sha256s, owner and mode), or
    None; the key to build the entry under, or None: a cache that is not trusted is warned about
    and not used for this compilation)."""
    if key is None:
        return None, None
    try:
        hit = cache.load(key, stem)
    except compile_cache.UntrustedCache as e:
        compile_cache.log.warning("sprue: not using the compile cache for %s: %s; compiling without it", stem, e)
        return None, None
    if hit is not None:
        compile_cache.count("hits")
    return hit, key


def _staging(cache, key: str | None, stem: str) -> Path | None:
    """A private folder inside the cache to build the entry of `key` in, or None (not cached)."""
    if key is None:
        return None
    try:
        return cache.staging(key)
    except OSError as e:
        compile_cache.log.warning("sprue: not caching %s: %s", stem, e)
        return None


def _build_into_cache(cache, key: str, staging: Path, text: str, sig: Signature, out_dir: Path, stem: str,
                      options: dict, meanwhile: Callable[[], None] | None = None) -> Path:
    """Built in a private folder inside the cache, then published atomically: the library to load
    (the entry's, or a copy in out_dir when it cannot be published)."""
    try:
        # only _mlir_ciface_main is called: the raw function, internal, is inlined into it and not
        # compiled a second time on its own (it was: twice the LLVM work of every kernel)
        library = _lowering().backend.build_shared_library(text, staging, name="lib", internal=["main"],
                                                           meanwhile=meanwhile, **options)
        save_signature(library, sig, "main", stem)
        (staging / compile_cache.STABLEHLO).write_text(text)
        try:
            library = cache.commit(key, staging, {"name": stem}).library
            return compile_cache.loadable(library, out_dir / f"{stem}.so")
        except (OSError, compile_cache.UntrustedCache) as e:
            compile_cache.log.warning("sprue: not caching %s: %s", stem, e)
            library = Path(shutil.copy2(library, out_dir / f"{stem}.so"))
            save_signature(library, sig, "main", stem)
            return library
    finally:
        cache.finish(staging)   # deleted unless published, and its lock released


class StableHLOFunction:
    """A compiled StableHLO entry function: call it with numpy arrays (or scalars)."""

    def __init__(self, prepared, library: Path, function: Any):
        self.mlir = prepared.text
        self.signature = prepared.signature
        self.library = library
        self._function = function
        self._assertions = list(getattr(prepared, "assertions", ()))   # JAX's shape assertions
        self._name = prepared.entry

    def __call__(self, *args: Any) -> Any:
        if self._assertions and len(args) == len(self.signature.args):
            shapes = [np.shape(a) for a in args]
            for assertion in self._assertions:
                assertion.check(shapes, self._name)
        outs = self._function(*args)
        if len(outs) == 1:
            return outs[0]
        return tuple(outs)

    def __repr__(self) -> str:
        return f"<sprue StableHLO function {self.signature} from {self.library}>"

    def __reduce__(self):
        """Pickled by program (api/pickle_format.py): the StableHLO text, compiled by the receiver
        (StableHLO loads are not cached)."""
        return unpickle_stablehlo, (dump_payload("stablehlo", {"mlir": self.mlir}),)


def unpickle_stablehlo(payload: bytes) -> StableHLOFunction:
    """A StableHLOFunction from its pickle (StableHLOFunction.__reduce__)."""
    body = load_payload(payload, "stablehlo")
    again = remembered(payload, ())
    if again is not None:
        return again
    if not isinstance(body.get("mlir"), str):
        raise malformed("a StableHLO program", TypeError(f"its text is a {type(body.get('mlir')).__name__}"))
    function = load_stablehlo(body["mlir"])
    remember(payload, (), function)
    return function


def load_stablehlo(path_or_text: str | os.PathLike, *, keep_intermediate: str | os.PathLike | None = None
                   ) -> StableHLOFunction:
    """Compiles a StableHLO module (a path to a `.mlir` file, or its text) and returns its entry
    function (@main, or the only public function) as a Python callable.

    With keep_intermediate (a directory), every pipeline stage's text is written there."""
    prepared = prepare_stablehlo(path_or_text)
    # a fresh folder per load: dlopen returns an already-loaded library for a path it has seen
    out = Path(keep_intermediate) if keep_intermediate else build_folder("stablehlo")
    library = _lowering().backend.build_shared_library(prepared.text, out, name=prepared.entry,
                                                       keep_intermediate=keep_intermediate is not None)
    return StableHLOFunction(prepared, library, load(library, prepared.entry, prepared.signature))


def write_library(stablehlo_text: str, library: Path, name: str, *, opt_level: int = 3, cpu: str = "host",
                  features: str = "", archive: Path | None = None, asm: bool = False,
                  on_stage: Callable[[str, object], None] | None = None, into: str | None = None) -> Path:
    """`sprue compile`'s build: the StableHLO module (entry function @name, and @into when given) ->
    `library`, exporting only `_mlir_ciface_<name>` (and `_mlir_ciface_<into>`: the raw functions
    are internal, the header's C wrappers take their names), and `archive` (a static library) when
    given. `on_stage` sees every stage (see backend.build_shared_library); a failing stage's IR is
    not saved (the command line reports the error)."""
    return _lowering().backend.build_shared_library(
        stablehlo_text, build_folder("cli"), name, library=library, opt_level=opt_level, cpu=cpu,
        features=features, internal=[name] + ([into] if into else []), asm=asm, archive=archive,
        on_stage=on_stage, save_failing_ir=False)
