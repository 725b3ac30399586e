"""C headers for compiled kernels: what a C (or C++) program needs to call a sprue library.

`c_header(HeaderSpec(...))` returns the text of `<name>.h` for a library that exports
`_mlir_ciface_<name>` (see abi.py for that ABI). The header holds:

- one memref descriptor typedef per (element type, rank) it uses, `memref_f64_1d` ..., each behind
  its own include guard, so headers of several kernels can be included in one file;
- `<name>_results`: one descriptor per result, in the order (and layout) the compiled code writes
  them; with run-time checks the first is `status`, an i64 scalar;
- the exported symbol `_mlir_ciface_<name>` and a `static inline` C-friendly wrapper `<name>()`
  that takes rank-0 arguments by value (a size `n`, a scalar `alpha`) and arrays as descriptors,
  and returns the status (always 0 for a kernel without checks). The kernel checks the sizes of
  its arguments' descriptors itself (lowering/rules_checks.py, entry checks); the wrapper checks
  what the kernel's code cannot see, their layout: strides must be row-major contiguous (one
  status code per array argument, after the kernel's codes; and one for its static sizes when the
  kernel does not check them, as a kernel from StableHLO does not), and `offset` is folded into
  `aligned` (the kernel reads from `aligned`). A failed allocation (the library's entry returns
  its byte count: lowering/allocation.py) is the status SPRUE_OUT_OF_MEMORY, with *out emptied;
- `<name>_status_message(status)`: the message of any status, SPRUE_OUT_OF_MEMORY's with the size
  (the library's `_sprue_error_<name>()`: this thread's last failure);
- `sprue_set_num_threads(n)` / `sprue_get_num_threads()`: the threads of the library's parallel
  loops, in every header (every library carries the pool: lowering/backend.py _runtime_sources),
  in the part every header shares (guarded: declared once however many headers are included);
- `<name>_free_results()`: every returned buffer is malloc'ed by the kernel and owned by the caller;
  this frees each distinct allocation once (two results may share one);
- when every result shape is a function of the inputs' sizes (never of their values):
  `<name>_result_shapes()`, the kernel's shape computation on its own (rendered from the
  signature's shape function, the same one the Python runtime evaluates), and `<name>_into()`, a
  destination-passing entry point into caller-allocated buffers. It is a *copying* wrapper, not
  real destination passing: the kernel still allocates its results, which are copied into the
  caller's buffers (any strides) and freed. Kernels whose result shapes depend on data get
  neither and always return callee-allocated results.

This module only formats text: it must not import the lowering (the runtime never needs MLIR).
"""
from __future__ import annotations

import dataclasses
import keyword
import re
from dataclasses import dataclass, field
from typing import Sequence

from sprue.runtime.c_names import C_KEYWORDS, CXX_KEYWORDS, SPRUE_PREFIX, check_kernel_name, derived_names
from sprue.runtime.element_types import ElementType
from sprue.runtime.kernel_signature import STATUS_SPEC, Signature, TensorSpec

__all__ = ["HeaderSpec", "c_header", "c_identifier", "descriptor_type", "unique_names"]

# A result dim: an int, or a C expression (over the `shape_params`) that evaluates to an int64_t.
ShapeDim = int | str

# Names a parameter may not take: keywords of C and C++ (the header is included from both), the
# wrapper's `out` and the `_into` wrapper's local `res`.
_C_KEYWORDS = C_KEYWORDS | CXX_KEYWORDS | {"out", "res"}


def c_identifier(text: str, fallback: str = "x") -> str:
    """`text` made into a C identifier: other characters become `_` (never two in a row: C++
    reserves `__`), a leading digit gets a `_` prefix, and C and C++ keywords (and `out`, `res`,
    the wrappers' own names), sprue's names (`sprue_*`: the header's helpers and macros) and
    Python keywords get a `_` suffix."""
    ident = re.sub(r"_{2,}", "_", re.sub(r"[^A-Za-z0-9_]+", "_", text)).strip("_") or fallback
    if ident[0].isdigit():
        ident = "_" + ident
    if ident in _C_KEYWORDS or keyword.iskeyword(ident) or ident.lower().startswith(SPRUE_PREFIX):
        ident += "_"
    return ident


def unique_names(names: Sequence[str], taken: set[str]) -> list[str]:
    """Each name, or `name_2`, `name_3`, ... when taken already; the results join `taken`."""
    out = []
    for n in names:
        candidate, k = n, 1
        while candidate in taken:
            k += 1
            candidate = f"{n}_{k}"
        taken.add(candidate)
        out.append(candidate)
    return out


def _fresh(base: str, taken: set[str], local_suffixes: Sequence[str]) -> str:
    """`base`, or `base_2`, ...: the first that neither it nor its locals (name + suffix) is taken;
    all join `taken`."""
    candidate, k = base, 1
    while candidate in taken or any(candidate + s in taken for s in local_suffixes):
        k += 1
        candidate = f"{base}_{k}"
    taken.add(candidate)
    taken.update(candidate + s for s in local_suffixes)
    return candidate


def descriptor_type(element: ElementType, rank: int) -> str:
    return f"memref_{element.name}_{rank}d"


@dataclass(frozen=True)
class HeaderSpec:
    """What a header is generated from.

    name: the kernel's C name (the library exports `_mlir_ciface_<name>`).
    arg_names / result_names: C parameter and field names (default: from the signature's names).
    result_shapes: per result, per dim, an int or a C expression over `shape_params`; None (the
    default): from the signature's shape function (runtime/shape_function.py), or none at all when
    it has none or some result dim depends on data (no `_result_shapes` and no `_into`).
    shape_params: the argument names (rank-0 integer arguments) the expressions read.
    source: where the kernel came from, for the header's first comment.
    kernel_checks_sizes: the kernel compares its arguments' descriptor sizes with the sizes it was
    compiled for itself (a kernel lowered from a jaxpr for C: its entry checks); else (StableHLO
    input, hand-written signatures) the wrapper checks the static ones.
    into_entry: the library also exports `_mlir_ciface_<name>_into`, which computes the results
    in destinations the caller passes (after the arguments: the status's cell first when the
    kernel has one), allocating none: `<name>_into` calls it where the destinations allow.
    extra_checks: more checks of the wrapper, after the descriptors' (a jax.export module's shape
    assertions, as C conditions over `<arg>->sizes[k]`).
    rows: the indices of the size arguments that are rows (`sprue.f64["*b", "n"]`): the kernel
    takes a row collapsed into one axis, of size the product of the row's sizes; the wrappers take
    the row as its rank and its sizes (`int64_t b_rank, const int64_t *b_sizes`) and compute that
    product (sprue_row_size), and the arrays it types are passed with the row as their first axis.
    arg_types: the arguments' types with their sizes named (`f64[784,w1_1]`: a jaxpr's, inferred
    or annotated), for the header's first comment; default: the signature's (`f64[784,?]`)."""
    name: str
    signature: Signature
    arg_names: Sequence[str] | None = None
    result_names: Sequence[str] | None = None
    result_shapes: Sequence[Sequence[ShapeDim]] | None = None
    shape_params: Sequence[str] = field(default_factory=tuple)
    source: str = ""
    kernel_checks_sizes: bool = False
    into_entry: bool = False
    extra_checks: Sequence[tuple[str, str]] = ()   # (C condition of a failure, message): JAX's shape assertions
    rows: Sequence[int] = ()   # the size arguments that are rows (OCANNL's row variables): see below
    arg_types: Sequence[str] | None = None   # each argument's type over the size arguments: `f64[784,h]`
    result_types: Sequence[str] | None = None   # ... and each result's
    notes: Sequence[str] = ()   # more lines of the header's first comment (what some arguments are)


@dataclass(frozen=True)
class _Param:
    name: str
    spec: TensorSpec
    row: bool = False   # a row's size, which the wrappers take as `<name>_rank, <name>_sizes`

    @property
    def by_value(self) -> bool:
        return self.spec.rank == 0

    @property
    def c_params(self) -> str:
        """The wrappers' parameter(s) for this argument."""
        if self.row:
            return f"int64_t {self.name}_rank, const int64_t *{self.name}_sizes"
        return _param_decl(self)

    @property
    def c_args(self) -> str:
        """What a wrapper passes on to another for this argument."""
        return f"{self.name}_rank, {self.name}_sizes" if self.row else self.name


def _row_sizes(params: Sequence[_Param], indent: str = "  ") -> list[str]:
    """The statements that compute each row's size (the product of its sizes) under its name."""
    return [f"{indent}int64_t {p.name} = sprue_row_size({p.name}_rank, {p.name}_sizes);" for p in params if p.row]


def _names(spec: HeaderSpec) -> tuple[list[_Param], list[_Param]]:
    sig = spec.signature
    taken = {"out", "status", "res", spec.name, *derived_names(spec.name)}
    arg_names = list(spec.arg_names) if spec.arg_names is not None else [c_identifier(a.name) for a in sig.args]
    res_names = (list(spec.result_names) if spec.result_names is not None
                 else [f"result{i}" for i in range(len(sig.results))])
    if len(arg_names) != len(sig.args) or len(res_names) != len(sig.results):
        raise ValueError(f"{spec.name}: {len(arg_names)} argument names for {len(sig.args)} arguments, "
                         f"{len(res_names)} result names for {len(sig.results)} results")
    # A name must also not be a local the wrappers derive from another: `<a>_value`, `<a>_d` for a
    # rank-0 argument (`<a>_d` for an array too), `<r>_expected`, `<r>_shape` for a result (the _into
    # and _result_shapes bodies).
    rows = set(spec.rows)
    args = [_Param(_fresh(c_identifier(n), taken, (("_value", "_d") + (("_rank", "_sizes") if i in rows else ()))
                          if s.rank == 0 else ("_d",)), s, i in rows)
            for i, (n, s) in enumerate(zip(arg_names, sig.args))]
    results = [_Param(_fresh(c_identifier(n), taken, ("_expected", "_shape")), s) for n, s in zip(res_names, sig.results)]
    if sig.has_status:
        results.insert(0, _Param("status", STATUS_SPEC))
    return args, results


def _descriptor_typedef(element: ElementType, rank: int) -> str:
    t = descriptor_type(element, rank)
    dims = f" int64_t sizes[{rank}]; int64_t strides[{rank}];" if rank else ""
    guard = f"SPRUE_{t.upper()}_DEFINED"
    return (f"#ifndef {guard}\n#define {guard}\n"
            f"typedef struct {{ {element.ctype} *allocated; {element.ctype} *aligned; int64_t offset;{dims} }} {t};\n"
            f"#endif\n")


# Shared by every header (guarded once): an unused-attribute for tables a program may not use, and
# the strided copy behind the `_into` entry points.
_COMMON = r"""#ifndef SPRUE_COMMON_DEFINED
#define SPRUE_COMMON_DEFINED
#if defined(__GNUC__) || defined(__clang__)
#define SPRUE_UNUSED __attribute__((unused))
#else
#define SPRUE_UNUSED
#endif
/* `_into` returns this when a destination's shape is not the result's shape. */
#define SPRUE_SHAPE_MISMATCH ((int64_t)-1)
/* A kernel's wrapper returns this when an allocation failed (too little memory): nothing was
   computed, *out is empty; <name>_status_message(SPRUE_OUT_OF_MEMORY) gives the size. */
#define SPRUE_OUT_OF_MEMORY ((int64_t)-2)
/* Copies a rank-`rank` strided array of `elem`-byte elements (strides in elements). */
static inline void sprue_copy_strided(char *dst, const int64_t *dst_strides, const char *src,
                                      const int64_t *src_strides, const int64_t *sizes, int rank,
                                      size_t elem) {
  int64_t i;
  if (rank == 0) { memcpy(dst, src, elem); return; }
  for (i = 0; i < sizes[0]; ++i)
    sprue_copy_strided(dst + i * dst_strides[0] * (int64_t)elem, dst_strides + 1,
                       src + i * src_strides[0] * (int64_t)elem, src_strides + 1, sizes + 1, rank - 1, elem);
}
/* Python's floor division (sizes may be negative in intermediate expressions). */
static inline int64_t sprue_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
static inline int64_t sprue_mod(int64_t a, int64_t b) { return a - sprue_floordiv(a, b) * b; }
static inline int64_t sprue_max(int64_t a, int64_t b) { return a > b ? a : b; }
/* The size a row (OCANNL's row variable: any number of leading axes) is passed as: the product of
   its sizes; -1 (which no array's axis has: the kernel's checks refuse it) for a negative rank or
   size, or a product beyond int64. */
static inline int64_t sprue_row_size(int64_t rank, const int64_t *sizes) {
  int64_t i, n = 1;
  if (rank < 0) return -1;
  for (i = 0; i < rank; ++i) {
    if (sizes[i] < 0 || (sizes[i] > 0 && n > INT64_MAX / sizes[i])) return -1;
    n *= sizes[i];
  }
  return n;
}
static inline int64_t sprue_min(int64_t a, int64_t b) { return a < b ? a : b; }
/* Whether the byte ranges [a, a + na) and [b, b + nb) meet (an empty one meets nothing). */
static inline int sprue_overlap(const char *a, int64_t na, const char *b, int64_t nb) {
  return na > 0 && nb > 0 && a < b + nb && b < a + na;
}
/* The threads parallel loops use, the calling one included: library-wide, and one pool per
   process however many sprue libraries it links (they all bind to the first one's). 1 = no
   thread is ever started. Default: SPRUE_NUM_THREADS, else the CPUs this process may use
   (sched_getaffinity), read at the first parallel loop; at most 256. sprue_set_num_threads
   returns the previous count; both may be called from any thread at any time. */
int sprue_set_num_threads(int n);
int sprue_get_num_threads(void);
/* Whether a descriptor's sizes and strides are those of a row-major contiguous array, the only
   layout a kernel reads (an axis of size 1 may have any stride; an empty array reads nothing).
   Unsigned products: they wrap, where a signed overflow would be undefined. */
static inline int sprue_row_major(const int64_t *sizes, const int64_t *strides, int rank) {
  uint64_t expected = 1;
  int i;
  for (i = 0; i < rank; ++i)
    if (sizes[i] <= 0) return sizes[i] == 0;
  for (i = rank - 1; i >= 0; --i) {
    if (sizes[i] != 1 && (uint64_t)strides[i] != expected) return 0;
    expected *= (uint64_t)sizes[i];
  }
  return 1;
}
#endif
"""


def _param_decl(p: _Param) -> str:
    if p.by_value:
        return f"{p.spec.element.ctype} {p.name}"
    return f"const {descriptor_type(p.spec.element, p.spec.rank)} *{p.name}"


def _results_struct(name: str, results: list[_Param]) -> str:
    fields = "\n".join(f"  {descriptor_type(r.spec.element, r.spec.rank)} {r.name};  /* {r.spec.type_str} */"
                       for r in results)
    return (f"/* The kernel's results, in the layout it writes them. Every `allocated` buffer is malloc'ed by\n"
            f"   the kernel and owned by the caller: release them with {name}_free_results(). */\n"
            f"typedef struct {{\n{fields}\n}} {name}_results;\n")


def _layout_message(a: _Param) -> str:
    return (f"argument {a.name} ({a.spec.type_str}): its descriptor is not a row-major contiguous array (sizes"
            f" not negative, strides[{a.spec.rank - 1}] = 1 and each stride the product of the sizes after it,"
            f" but for axes of size 1): the kernel reads its elements one after another from aligned + offset")


def _sizes_message(a: _Param) -> str:
    static = ", ".join(f"sizes[{i}] = {d}" for i, d in enumerate(a.spec.shape) if d is not None)
    return (f"argument {a.name} ({a.spec.type_str}): its descriptor's sizes are not those the kernel was compiled"
            f" for ({static})")


def _wrapper_checks(args: list[_Param], kernel_checks_sizes: bool) -> list[tuple[str, str]]:
    """What the wrapper checks of each array's descriptor before the kernel runs, as (C condition of
    a failure, message): its static sizes, when the kernel does not, and its layout."""
    checks = []
    for a in args:
        if a.by_value:
            continue
        static = [f"{a.name}->sizes[{i}] != {d}" for i, d in enumerate(a.spec.shape) if d is not None]
        if static and not kernel_checks_sizes:
            checks.append((" || ".join(static), _sizes_message(a)))
        checks.append((f"!sprue_row_major({a.name}->sizes, {a.name}->strides, {a.spec.rank})", _layout_message(a)))
    return checks


def _call_body(name: str, args: list[_Param], has_status: bool, out: str,
               wrapper_checks: Sequence[tuple[str, int]] = ()) -> list[str]:
    """Statements that check each array's descriptor (`wrapper_checks`: C condition of a failure,
    status code), pass it on with its offset folded into `aligned` (the kernel's code assumes
    offset 0), wrap rank-0 arguments in descriptors, call the kernel and return its status."""
    lines = _row_sizes(args)
    arrays = [a for a in args if not a.by_value]
    for failed, code in wrapper_checks:
        lines.append(f"  if ({failed}) {{ memset({out}, 0, sizeof *{out}); return {code}; }}")
    for a in arrays:
        lines.append(f"  {descriptor_type(a.spec.element, a.spec.rank)} {a.name}_d = *{a.name};")
        lines.append(f"  {a.name}_d.aligned += {a.name}_d.offset; {a.name}_d.offset = 0;")
    for a in args:
        if a.by_value:
            t = descriptor_type(a.spec.element, 0)
            lines.append(f"  {a.spec.element.ctype} {a.name}_value = {a.name};")
            lines.append(f"  {t} {a.name}_d;")
            lines.append(f"  {a.name}_d.allocated = &{a.name}_value; {a.name}_d.aligned = &{a.name}_value;"
                         f" {a.name}_d.offset = 0;")
    call_args = ", ".join([out] + [f"&{a.name}_d" for a in args])
    # a failed allocation: the kernel freed everything and wrote nothing (lowering/allocation.py)
    lines.append(f"  if (_mlir_ciface_{name}({call_args}) != 0) {{ memset({out}, 0, sizeof *{out});"
                 f" return SPRUE_OUT_OF_MEMORY; }}")
    lines.append(f"  return {out}->status.aligned[{out}->status.offset];" if has_status else "  return 0;")
    return lines


def _entry_points(name: str, args: list[_Param], results: list[_Param], has_status: bool,
                  wrapper_checks: Sequence[tuple[str, int]]) -> str:
    ciface_params = ", ".join([f"{name}_results *out"] + [
        f"const {descriptor_type(a.spec.element, a.spec.rank)} *{a.name}" for a in args])
    params = ", ".join([f"{name}_results *out"] + [a.c_params for a in args])
    status_doc = (f"Returns the status: 0 when every run-time check held, else the 1-based code of the first\n"
                  f"   that failed (its message: {name}_status_message(code)); *out is to be freed either way."
                  if has_status or wrapper_checks else "Returns 0 (this kernel has no run-time checks).")
    status_doc += (f"\n   Or SPRUE_OUT_OF_MEMORY when an allocation failed: nothing was computed and *out is empty\n"
                   f"   (freeing it does nothing); {name}_status_message(SPRUE_OUT_OF_MEMORY) says how much.")
    if wrapper_checks:
        status_doc += ("\n   Array descriptors must be row-major contiguous (any offset): else nothing runs and the\n"
                       "   status names the argument.")
    body = "\n".join(_call_body(name, args, has_status, "out", wrapper_checks))
    return (f"/* The symbol the library exports (MLIR's C interface): one descriptor pointer per argument.\n"
            f"   It reads arrays as row-major contiguous from `aligned`, ignoring `offset` and `strides`:\n"
            f"   {name}() below checks them. Returns 0, or the byte count of an allocation that failed (then\n"
            f"   it wrote nothing to *out, and _sprue_error_{name}() is this thread's message about it). */\n"
            f"int64_t _mlir_ciface_{name}({ciface_params});\n"
            f"const char *_sprue_error_{name}(void);\n\n"
            f"/* Calls the kernel; rank-0 arguments are passed by value, arrays as descriptors{_rows_doc(args)}.\n"
            f"   Fills *out; free it with {name}_free_results(out).\n   {status_doc} */\n"
            f"static inline int64_t {name}({params}) {{\n{body}\n}}\n")


def _arg_type(a: _Param, symbolic: str | None) -> str:
    return "row (rank, sizes)" if a.row else symbolic or a.spec.type_str


def _rows_doc(args: list[_Param]) -> str:
    rows = [a.name for a in args if a.row]
    if not rows:
        return ""
    return (f";\n   a row ({', '.join(rows)}: any number of leading axes) as its rank and sizes, the arrays it types\n"
            f"   with the row as their first axis (sizes[0] the product of the row's sizes)")


def _free_results(name: str, results: list[_Param]) -> str:
    ptrs = ", ".join(f"(void *)out->{r.name}.allocated" for r in results)
    return (f"/* Frees every buffer in *out once (results may share an allocation), then clears *out. */\n"
            f"static inline void {name}_free_results({name}_results *out) {{\n"
            f"  void *buffers[{len(results)}] = {{ {ptrs} }};\n"
            f"  int i, j;\n"
            f"  for (i = 0; i < {len(results)}; ++i) {{\n"
            f"    int seen = 0;\n"
            f"    for (j = 0; j < i; ++j) seen |= buffers[j] == buffers[i];\n"
            f"    if (!seen) free(buffers[i]);\n"
            f"  }}\n"
            f"  memset(out, 0, sizeof *out);\n}}\n")


def _status_table(name: str, messages: Sequence[str]) -> str:
    entries = "".join(f"  {_c_string(m)},\n" for m in messages)
    coded = (f"  return code >= 1 && code <= {len(messages)} ? {name}_status_messages[code - 1] : 0;\n"
             if messages else "  return 0;\n")
    return (f"#define {name.upper()}_STATUS_COUNT {len(messages)}\n"
            f"/* The message of status code c (1-based) is {name}_status_messages[c - 1]. */\n"
            f"static const char *{name}_status_messages[] SPRUE_UNUSED = {{\n{entries}  0\n}};\n"
            f"/* The message of a status {name}() returned (0 for a code it never returns). SPRUE_OUT_OF_MEMORY's\n"
            f"   (the size that could not be allocated) is this thread's, until its next failed allocation. */\n"
            f"static inline const char *{name}_status_message(int64_t code) {{\n"
            f"  if (code == SPRUE_OUT_OF_MEMORY) return _sprue_error_{name}();\n{coded}}}\n")


def _c_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    # a `?` before another `?` could form a trigraph in C99
    return '"' + escaped.replace("??", "?\\?") + '"'


def _in_place(spec: HeaderSpec, args: list[_Param], data: list[_Param],
              wrapper_checks: Sequence[tuple[str, int]]) -> list[str]:
    """The lines of `_into` that call the library's destination-passing entry (HeaderSpec's
    into_entry) when every destination is row-major contiguous and shares no byte with an array
    argument or another destination, and return; the copying path follows them."""
    name, has_status = spec.name, spec.signature.has_status

    def span(p: _Param) -> str:   # first byte, byte count of an array argument or destination
        count = " * ".join([f"{p.name}->sizes[{i}]" for i in range(p.spec.rank)]
                           + [f"(int64_t)sizeof({p.spec.element.ctype})"])
        return f"(const char *)({p.name}->aligned + {p.name}->offset), {count}"
    arrays = [a for a in args if not a.by_value]
    fits = [f"sprue_row_major({r.name}->sizes, {r.name}->strides, {r.spec.rank})" for r in data if r.spec.rank]
    for i, r in enumerate(data):
        fits += [f"!sprue_overlap({span(r)},\n                     {span(o)})" for o in arrays + data[:i]]
    joined = " &&\n      ".join(fits) or "1"
    lines = [f"  if ({joined}) {{   /* computed in place: nothing allocated or copied */"]
    lines += [f"    if ({failed}) return {code};" for failed, code in wrapper_checks]
    for a in arrays:
        lines.append(f"    {descriptor_type(a.spec.element, a.spec.rank)} {a.name}_d = *{a.name};")
        lines.append(f"    {a.name}_d.aligned += {a.name}_d.offset; {a.name}_d.offset = 0;")
    for a in args:
        if a.by_value:
            lines.append(f"    {a.spec.element.ctype} {a.name}_value = {a.name};")
            lines.append(f"    {descriptor_type(a.spec.element, 0)} {a.name}_d;")
            lines.append(f"    {a.name}_d.allocated = &{a.name}_value; {a.name}_d.aligned = &{a.name}_value;"
                         f" {a.name}_d.offset = 0;")
    for r in data:
        lines.append(f"    {descriptor_type(r.spec.element, r.spec.rank)} {r.name}_d = *{r.name};")
        lines.append(f"    {r.name}_d.aligned += {r.name}_d.offset; {r.name}_d.offset = 0;")
    dests = [f"&{r.name}_d" for r in data]
    if has_status:
        lines.append("    int64_t status_value = 0;")
        lines.append(f"    {descriptor_type(STATUS_SPEC.element, 0)} status_d;")
        lines.append("    status_d.allocated = &status_value; status_d.aligned = &status_value; status_d.offset = 0;")
        dests.insert(0, "&status_d")
    call = ", ".join([f"&{a.name}_d" for a in args] + dests)
    lines.append(f"    if (_mlir_ciface_{name}_into({call}) != 0) return SPRUE_OUT_OF_MEMORY;")
    lines.append(f"    return {'status_value' if has_status else '0'};")
    lines.append("  }")
    return lines


def _into_declaration(spec: HeaderSpec, args: list[_Param], data: list[_Param]) -> str:
    params = [f"const {descriptor_type(a.spec.element, a.spec.rank)} *{a.name}" for a in args]
    if spec.signature.has_status:
        params.append(f"{descriptor_type(STATUS_SPEC.element, 0)} *status")
    params += [f"{descriptor_type(r.spec.element, r.spec.rank)} *{r.name}" for r in data]
    status = " (the status first)" if spec.signature.has_status else ""
    return (f"/* The library's destination-passing entry: the arguments as for _mlir_ciface_{spec.name}, then\n"
            f"   the destinations{status}, row-major contiguous from `aligned`; it allocates no result.\n"
            f"   Returns 0, or the byte count of an allocation that failed. */\n"
            f"int64_t _mlir_ciface_{spec.name}_into({', '.join(params)});\n\n")


def _shape_functions(spec: HeaderSpec, args: list[_Param], results: list[_Param],
                     wrapper_checks: Sequence[tuple[str, int]] = ()) -> str:
    """`<name>_result_shapes` (when some result has a dim) and `<name>_into`."""
    name = spec.name
    data = results[int(spec.signature.has_status):]
    ranked = [(r, dims) for r, dims in zip(data, spec.result_shapes) if r.spec.rank]
    out = ""
    by_name = {a.name: a for a in args}
    shape_args = [by_name.get(p, _Param(p, STATUS_SPEC)) for p in spec.shape_params]
    if ranked:
        params = [p.c_params if p.row else f"int64_t {p.name}" for p in shape_args] + [
            f"int64_t {r.name}_shape[{r.spec.rank}]" for r, _ in ranked]
        body = _row_sizes(shape_args)
        body += [f"  (void){p};" for p in spec.shape_params]   # a size may bind only input dims
        body += [f"  {r.name}_shape[{i}] = {d};" for r, dims in ranked for i, d in enumerate(dims)]
        out += (f"/* The shape half of the kernel (no data needed): each result's sizes from the sizes it\n"
                f"   was given. */\n"
                f"static inline void {name}_result_shapes({', '.join(params)}) {{\n" + "\n".join(body) + "\n}\n\n")
    dest = [f"{descriptor_type(r.spec.element, r.spec.rank)} *{r.name}" for r in data]
    lines = (_row_sizes(args) if spec.into_entry else []) + [f"  {name}_results res;", "  int64_t status;"]
    if ranked:
        lines += [f"  int64_t {r.name}_expected[{r.spec.rank}];" for r, _ in ranked]
        call = ", ".join([p.c_args for p in shape_args] + [f"{r.name}_expected" for r, _ in ranked])
        lines.append(f"  {name}_result_shapes({call});")
        checks = " ||\n      ".join(
            f"{r.name}->sizes[{i}] != {r.name}_expected[{i}]" for r, _ in ranked for i in range(r.spec.rank))
        lines.append(f"  if ({checks})\n    return SPRUE_SHAPE_MISMATCH;")
    if spec.into_entry:
        lines += _in_place(spec, args, data, wrapper_checks)
    lines.append(f"  status = {name}({', '.join(['&res'] + [a.c_args for a in args])});")
    lines.append("  if (status == 0) {   /* else the results may be empty, or not even allocated */")
    for r in data:
        strided = r.spec.rank > 0
        dst_strides = f"{r.name}->strides" if strided else "0"
        src_strides, sizes = (f"res.{r.name}.strides", f"res.{r.name}.sizes") if strided else ("0", "0")
        lines.append(f"    sprue_copy_strided((char *)({r.name}->aligned + {r.name}->offset), {dst_strides},\n"
                     f"                       (const char *)(res.{r.name}.aligned + res.{r.name}.offset),"
                     f" {src_strides}, {sizes}, {r.spec.rank}, sizeof({r.spec.element.ctype}));")
    lines += ["  }", f"  {name}_free_results(&res);", "  return status;"]
    params = ", ".join(dest + [a.c_params for a in args])
    how = ("Row-major contiguous destinations that share no byte with an array\n"
           "   argument or with each other are written by the kernel itself, which allocates no result\n"
           "   (the library's _into entry); others (any strides) get the kernel's results copied in.\n"
           "   Returns the kernel's status (with a failed check the destinations may have been written),\n"
           if spec.into_entry else
           "A copying wrapper: the kernel allocates its results, which\n"
           "   are copied into the destinations and freed. Returns the kernel's status (the destinations\n"
           "   are written only when it is 0),\n")
    if spec.into_entry:
        out += _into_declaration(spec, args, data)
    out += (f"/* Destination passing: the caller allocates each result (sizes from {name}_result_shapes, any\n"
            f"   strides) and passes its descriptor. {how}"
            f"   or SPRUE_SHAPE_MISMATCH (nothing is computed) if a destination has the wrong sizes. */\n"
            f"static inline int64_t {name}_into({params}) {{\n" + "\n".join(lines) + "\n}\n")
    return out


def c_header(spec: HeaderSpec) -> str:
    """The text of the C header of one kernel (see the module docstring)."""
    check_kernel_name(spec.name)   # a KernelNameError (a ValueError) for a name C cannot take (c_names.py)
    sig = spec.signature
    if not sig.results:
        raise ValueError(f"{spec.name}: a kernel without results cannot be called usefully from C")
    if spec.result_shapes is not None and len(spec.result_shapes) != len(sig.results):
        raise ValueError(f"{spec.name}: {len(spec.result_shapes)} result shapes for {len(sig.results)} results")
    args, results = _names(spec)
    if spec.result_shapes is None and sig.shape_function is not None and sig.shape_function.complete:
        # the one source of truth: the shape function, over the final C names of the arguments
        shapes, params = sig.shape_function.c_shapes([a.name for a in args])
        spec = dataclasses.replace(spec, result_shapes=shapes, shape_params=params)
    types = sorted({(p.spec.element.name, p.spec.rank, p.spec.element) for p in args + results},
                   key=lambda t: (t[0], t[1]))
    guard = f"SPRUE_KERNEL_{spec.name}_H"   # not upper(): kernels `k` and `K` may be included together
    arg_types = list(spec.arg_types) if spec.arg_types is not None else [None] * len(args)
    result_types = list(spec.result_types) if spec.result_types is not None else [None] * len(sig.results)
    notes = "".join(f"   {line}\n" for line in spec.notes)
    parts = [
        f"/* {spec.name}.h: generated by sprue{' from ' + spec.source if spec.source else ''}. Do not edit.\n"
        f"   Signature: ({', '.join(f'{a.name}: {_arg_type(a, t)}' for a, t in zip(args, arg_types))})"
        f" -> ({', '.join(t or r.spec.type_str for r, t in zip(results[int(sig.has_status):], result_types))})\n"
        f"{notes}"
        f"   Link with lib{spec.name}.so (it needs only the C library: libc, libm, libmvec, libpthread;\n"
        f"   lib{spec.name}.a: add -lm -lpthread). Calls are thread-safe: the kernel keeps no state between\n"
        f"   calls. */\n",
        f"#ifndef {guard}\n#define {guard}\n\n#include <stdint.h>\n#include <stdlib.h>\n#include <string.h>\n\n"
        f"#ifdef __cplusplus\nextern \"C\" {{\n#endif\n",
        "".join(_descriptor_typedef(e, r) for _, r, e in types),
        _COMMON,
        _results_struct(spec.name, results),
    ]
    # The wrapper's own codes follow the kernel's: per array argument, its layout (and its static
    # sizes, when the kernel does not check them).
    kernel_messages = list(sig.status_messages or ())
    wrapper = _wrapper_checks(args, spec.kernel_checks_sizes) + list(spec.extra_checks)
    codes = [(failed, len(kernel_messages) + 1 + k) for k, (failed, _) in enumerate(wrapper)]
    parts.append(_entry_points(spec.name, args, results, sig.has_status, codes))
    # every kernel has a status: a failed allocation (SPRUE_OUT_OF_MEMORY) at least
    parts.append(_status_table(spec.name, kernel_messages + [message for _, message in wrapper]))
    parts.append(_free_results(spec.name, results))
    if spec.result_shapes is not None:
        parts.append(_shape_functions(spec, args, results, codes))
    parts.append(f"#ifdef __cplusplus\n}}\n#endif\n\n#endif /* {guard} */\n")
    return "\n".join(parts)
