"""Hypothesis strategies producing fuzz inputs (bytes) for the jaxpr reader and the StableHLO input.

    mutated(kind)       a corpus file after 1..6 mutations: byte flips, deletions, duplications,
                        random insertions, splices with another corpus file, token-level edits
                        (swap / delete / duplicate tokens, replace identifiers, numbers and
                        types by others: `f64[3]` -> `i8[0,2]`, `tensor<3xf32>` -> `tensor<?x0xi1>`),
                        deep nesting of brackets, params/attributes replaced by values of
                        the corpus or dropped, primitives (ops) replaced by others
    token_soup(kind)    random token sequences from the format's vocabulary, bare or wrapped in a
                        valid frame (`{ lambda ; a:f32[3]. let ... in (a,) }`, `func.func @main ...`)
    random_bytes()      random bytes, sometimes after a valid prefix
    inputs(kind)        all three, mutations weighted most; for the kinds that are programs or
                        options (huge, options, fork), the strategy of classes.py

Every strategy is deterministic given hypothesis's choices, so derandomize=True makes a run repeatable.
"""
from __future__ import annotations

import re
from functools import lru_cache

from hypothesis import strategies as st

from . import classes, harness

# -- vocabularies ------------------------------------------------------------------------------
JAXPR_DTYPES = ["f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8", "u64", "u32", "u8", "bool", "c64",
                "float0", "f8_e4m3fn", "i4", "u1", "x", "f"]
MLIR_ELEMENT_TYPES = ["f64", "f32", "f16", "bf16", "i64", "i32", "i16", "i8", "i1", "ui8", "ui32", "ui64",
                      "si32", "i0", "i128", "i3", "index", "complex<f32>", "f8E4M3FN", "none", "tuple<>"]
NUMBERS = ["0", "1", "-1", "2", "3", "7", "-0", "0.0", "-0.0", "1.5", "1e308", "1e309", "-1e400", "5e-324",
           "2147483647", "2147483648", "-2147483649", "9223372036854775807", "9223372036854775808",
           "-9223372036854775809", "18446744073709551616", "99999999999999999999999999999", "inf", "-inf",
           "nan", "0x7FF8000000000001", "0xFFFFFFFF", "1_000", "00", "1e", ".5", "5."]
JAXPR_PUNCT = ["{", "}", "[", "]", "(", ")", ",", ";", ":", "=", ".", "*", "+", "-", "//", "%", "<", ">",
               "'", '"', "#", "\n", "_", "lambda", "let", "in", "True", "False", "None"]
MLIR_PUNCT = ["{", "}", "[", "]", "(", ")", "<", ">", ",", ":", "=", "->", "%", "@", "^", "#", "!", "\"", "x",
              "?", "\n", "module", "func.func", "return", "dense<", "tensor<", "loc(", "attributes", "private",
              "{-#", "#-}", "//", "...", "*", "%0", "%arg0", "@main", "^bb0", "#stablehlo", "array<i64:",
              "dense_resource<", "affine_map<(d0) -> (d0)>", "!stablehlo.token", "unit", "true", "false",
              # foreign dialects and resources (what a StableHLO program may not hold)
              "llvm.inline_asm", "llvm.load", "llvm.mlir.zero", "llvm.call", "!llvm.ptr", "llvm.emit_c_interface",
              "llvm.linkage", "llvm.noalias", "func.call", "func.func private", "arith.addi", "tensor.empty",
              "\"foo.bar\"", "builtin.module", "{-#\n  dialect_resources: {\n    builtin: {\n      blob: \"0x08000000",
              "\"0x04000000\"", "}\n  }\n#-}", "dense_resource<blob>", "external_resources", "mlir_reproducer"]

_JAXPR_TYPE = re.compile(rb"\b(?:f64|f32|f16|bf16|i64|i32|i16|i8|u64|u32|u16|u8|bool)\[[^\]\n]*\]")
_MLIR_TYPE = re.compile(rb"tensor<[^<>\n]*>")
_NUMBER = re.compile(rb"-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?")
_IDENT = re.compile(rb"[A-Za-z_][A-Za-z0-9_.\-]*")
_TOKEN = re.compile(rb"\s+|[A-Za-z_%@^#][A-Za-z0-9_.$\-]*|-?\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\"(?:[^\"\\\n]|\\.)*\"|.",
                    re.DOTALL)


@lru_cache(maxsize=None)
def seeds(kind: str) -> tuple[bytes, ...]:
    out = tuple(data for _, data in harness.corpus(kind) + harness.corpus(kind, hostile=True))
    if not out:
        raise RuntimeError(f"no {kind} seeds in {harness.CORPUS / kind}: run tests/fuzz/make_corpus.py")
    return out


@lru_cache(maxsize=None)
def vocabulary(kind: str) -> tuple[bytes, ...]:
    """Words to put in: the vocabulary file, plus every identifier in the corpus."""
    name = "vocab_jaxpr.txt" if kind == "jaxpr" else "vocab_mlir.txt"
    words = set()
    p = harness.CORPUS / name
    if p.exists():
        words |= {w.encode() for w in p.read_text().split()}
    for data in seeds(kind):
        words |= set(_IDENT.findall(data))
    words |= {w.encode() for w in (JAXPR_PUNCT if kind == "jaxpr" else MLIR_PUNCT)}
    words |= {w.encode() for w in NUMBERS}
    return tuple(sorted(words))


def _tokens(data: bytes) -> list[bytes]:
    return _TOKEN.findall(data)


# -- random types ------------------------------------------------------------------------------
@st.composite
def dims(draw) -> list[str]:
    n = draw(st.integers(0, 4))
    return [draw(st.sampled_from(["0", "1", "2", "3", "7", "-1", "a", "b", "2*a", "a+1", "a//0", "a%0", "n",
                                  "99999999999", "4294967296", "(a)", "-a", "1.5"])) for _ in range(n)]


@st.composite
def jaxpr_type(draw) -> bytes:
    return f"{draw(st.sampled_from(JAXPR_DTYPES))}[{','.join(draw(dims()))}]".encode()


@st.composite
def mlir_type(draw) -> bytes:
    n = draw(st.integers(0, 4))
    ds = [draw(st.sampled_from(["0", "1", "2", "3", "?", "-1", "4294967296", "9223372036854775807"]))
          for _ in range(n)]
    elt = draw(st.sampled_from(MLIR_ELEMENT_TYPES))
    return ("tensor<" + "".join(d + "x" for d in ds) + elt + ">").encode()


# -- mutations ---------------------------------------------------------------------------------
def _pos(draw, data: bytes) -> int:
    return draw(st.integers(0, len(data)))


def _span(draw, data: bytes, max_len: int = 64) -> tuple[int, int]:
    a = _pos(draw, data)
    return a, min(len(data), a + draw(st.integers(0, max_len)))


def m_flip(draw, data, kind):
    if not data:
        return data
    i = draw(st.integers(0, len(data) - 1))
    new = draw(st.one_of(st.integers(0, 255), st.sampled_from(list(b"{}[]()<>:;,.=%@#\"' \n0-_x?"))))
    return data[:i] + bytes([new]) + data[i + 1:]


def m_delete(draw, data, kind):
    a, b = _span(draw, data)
    return data[:a] + data[b:]


def m_duplicate(draw, data, kind):
    a, b = _span(draw, data, 256)
    at = _pos(draw, data)
    return data[:at] + data[a:b] + data[at:]


def m_insert_bytes(draw, data, kind):
    at = _pos(draw, data)
    return data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at:]


def m_splice(draw, data, kind):
    other = draw(st.sampled_from(seeds(kind)))
    return data[:_pos(draw, data)] + other[_pos(draw, other):]


def _token_edit(draw, data, kind, edit):
    toks = _tokens(data)
    words = [i for i, t in enumerate(toks) if not t.isspace()]
    if not words:
        return data
    i = draw(st.sampled_from(words))
    toks = edit(draw, toks, i, words)
    return b"".join(toks)


def m_token_delete(draw, data, kind):
    def edit(draw, toks, i, words):
        return toks[:i] + toks[i + draw(st.integers(1, 3)):]
    return _token_edit(draw, data, kind, edit)


def m_token_duplicate(draw, data, kind):
    def edit(draw, toks, i, words):
        n = draw(st.integers(1, 8))
        return toks[:i] + toks[i:i + n] * draw(st.integers(2, 4)) + toks[i + n:]
    return _token_edit(draw, data, kind, edit)


def m_token_swap(draw, data, kind):
    def edit(draw, toks, i, words):
        j = draw(st.sampled_from(words))
        toks = list(toks)
        toks[i], toks[j] = toks[j], toks[i]
        return toks
    return _token_edit(draw, data, kind, edit)


def m_token_replace(draw, data, kind):
    """An identifier by another word, a number by an interesting number, punctuation by punctuation."""
    def edit(draw, toks, i, words):
        t = toks[i]
        if _NUMBER.fullmatch(t):
            new = draw(st.sampled_from(NUMBERS)).encode()
        elif _IDENT.fullmatch(t) or t[:1] in b"%@^#":
            new = draw(st.sampled_from(vocabulary(kind)))
            if t[:1] in b"%@^#" and draw(st.booleans()):
                new = t[:1] + new
        else:
            new = draw(st.sampled_from(JAXPR_PUNCT if kind == "jaxpr" else MLIR_PUNCT)).encode()
        return toks[:i] + [new] + toks[i + 1:]
    return _token_edit(draw, data, kind, edit)


def m_token_insert(draw, data, kind):
    def edit(draw, toks, i, words):
        new = [draw(st.sampled_from(vocabulary(kind))) for _ in range(draw(st.integers(1, 4)))]
        return toks[:i] + [b" " + b" ".join(new) + b" "] + toks[i:]
    return _token_edit(draw, data, kind, edit)


def m_type(draw, data, kind):
    """A type by a random one: `f64[3]` -> `i8[0,2]`, `tensor<3xf32>` -> `tensor<?x0xi1>`."""
    pat, strat = (_JAXPR_TYPE, jaxpr_type()) if kind == "jaxpr" else (_MLIR_TYPE, mlir_type())
    found = list(pat.finditer(data))
    if not found:
        return data
    m = draw(st.sampled_from(found))
    return data[:m.start()] + draw(strat) + data[m.end():]


def m_same_type_everywhere(draw, data, kind):
    """Every occurrence of one type replaced by another one (keeps the program consistent more often)."""
    pat, strat = (_JAXPR_TYPE, jaxpr_type()) if kind == "jaxpr" else (_MLIR_TYPE, mlir_type())
    found = sorted({m.group() for m in pat.finditer(data)})
    if not found:
        return data
    old = draw(st.sampled_from(found))
    return data.replace(old, draw(strat))


def m_number(draw, data, kind):
    found = list(_NUMBER.finditer(data))
    if not found:
        return data
    m = draw(st.sampled_from(found))
    return data[:m.start()] + draw(st.sampled_from(NUMBERS)).encode() + data[m.end():]


def m_nest(draw, data, kind):
    """Deep nesting: a run of openers (and sometimes their closers) at some point."""
    pairs = [(b"(", b")"), (b"[", b"]"), (b"{", b"}"), (b"<", b">")]
    if kind == "jaxpr":
        pairs += [(b"{ lambda ; . let in (", b") }"), (b"-", b""), (b"(a+", b")")]
    else:
        pairs += [(b"tensor<", b"xf32>"), (b"[", b"],"), (b"\"stablehlo.tuple\"(", b")"),
                  (b"array<", b">"), (b"{a = ", b"}"), (b"loc(fused[", b"])"), (b"(", b" -> ()")]
    o, c = draw(st.sampled_from(pairs))
    n = draw(st.sampled_from([10, 100, 1000, 5000, 20000, 100000]))
    at = _pos(draw, data)
    body = o * n + (c * n if draw(st.booleans()) else b"")
    return data[:at] + body + data[at:]


def m_long_token(draw, data, kind):
    at = _pos(draw, data)
    unit = draw(st.sampled_from([b"a", b"9", b"%", b"x", b"1x", b"f", b"_", b"\"", b" ", b"\n", b"#"]))
    return data[:at] + unit * draw(st.sampled_from([100, 10000, 200000])) + data[at:]


def m_truncate(draw, data, kind):
    return data[:_pos(draw, data)]


_JAXPR_PARAM = re.compile(rb"\b([a-z_]+)=(\([^()\n]*\)|\[[^\[\]\n]*\]|[A-Za-z_][\w.]*(?:\([^()\n]*\))?|-?\d[\w.+-]*|'[^'\n]*')")
_MLIR_ATTR = re.compile(rb"\b([a-z_]+) = (array<[^<>\n]*>|\[[^\[\]\n]*\]|dense<[^<>\n]*>|-?\d+(?: : \w+)?|#[\w.]+<[^<>\n]*>|\w+)")
_MLIR_OP = re.compile(rb"\b(stablehlo|chlo|func|tensor|arith|math)\.([a-z_]+)\b")


@lru_cache(maxsize=None)
def param_values(kind: str) -> tuple[tuple[bytes, bytes], ...]:
    """(name, value) of every param (jaxpr) or attribute (MLIR) in the corpus."""
    pat = _JAXPR_PARAM if kind == "jaxpr" else _MLIR_ATTR
    out = set()
    for data in seeds(kind):
        out |= {(m.group(1), m.group(2)) for m in pat.finditer(data)}
    return tuple(sorted(out))


def m_param_value(draw, data, kind):
    """A param's (an attribute's) value by another value seen in the corpus, of the same name mostly."""
    pat = _JAXPR_PARAM if kind == "jaxpr" else _MLIR_ATTR
    found = list(pat.finditer(data))
    if not found:
        return data
    m = draw(st.sampled_from(found))
    pool = param_values(kind)
    same = [v for n, v in pool if n == m.group(1)]
    if same and draw(st.integers(0, 3)):
        new = draw(st.sampled_from(same))
    else:
        new = draw(st.sampled_from(pool))[1]
    return data[:m.start(2)] + new + data[m.end(2):]


def m_param_drop(draw, data, kind):
    pat = _JAXPR_PARAM if kind == "jaxpr" else _MLIR_ATTR
    found = list(pat.finditer(data))
    if not found:
        return data
    m = draw(st.sampled_from(found))
    return data[:m.start()] + data[m.end():]


def m_primitive(draw, data, kind):
    """An equation's primitive (an op's name) by another one: same arity more often than not."""
    if kind == "jaxpr":
        found = list(re.finditer(rb"= ([a-z_][a-z0-9_-]*)\b", data))
        if not found:
            return data
        m = draw(st.sampled_from(found))
        words = [w for w in vocabulary(kind) if re.fullmatch(rb"[a-z][a-z0-9_-]*", w)]
        return data[:m.start(1)] + draw(st.sampled_from(words)) + data[m.end(1):]
    found = list(_MLIR_OP.finditer(data))
    if not found:
        return data
    m = draw(st.sampled_from(found))
    ops = sorted({o for o in vocabulary(kind) if o.startswith(m.group(1) + b".")}) or [m.group()]
    return data[:m.start()] + draw(st.sampled_from(ops)) + data[m.end():]


MUTATORS = [m_flip, m_delete, m_duplicate, m_insert_bytes, m_splice, m_token_delete, m_token_duplicate,
            m_token_swap, m_token_replace, m_token_replace, m_token_insert, m_type, m_type,
            m_same_type_everywhere, m_number, m_number, m_nest, m_long_token, m_truncate,
            m_param_value, m_param_value, m_param_value, m_param_drop, m_primitive, m_primitive]


@st.composite
def mutated(draw, kind: str) -> bytes:
    data = draw(st.sampled_from(seeds(kind)))
    for _ in range(draw(st.integers(1, 6))):
        data = draw(st.sampled_from(MUTATORS))(draw, data, kind)
    return data


# -- token soups and random bytes ------------------------------------------------------------------
JAXPR_FRAMES = [
    (b"", b""),
    (b"{ lambda ; a:f32[3]. let\n  ", b"\n  in (a,) }\n"),
    (b"{ lambda ; a:f32[3] b:i32[]. let\n  c:f32[3] = ", b"\n  in (c,) }\n"),
    (b"# sprue saved program 1\n# args [\"x\"]\n{ lambda ; a:f64[2]. let b:f64[2] = ", b" a in (b,) }\n"),
    (b"{ lambda ; a:f32[3]. let b:f32[3] = pjit[name=f jaxpr={ lambda ; c:f32[3]. let ", b" in (c,) }] a in (b,) }"),
]
MLIR_FRAMES = [
    (b"", b""),
    (b"module {\n  func.func @main(%arg0: tensor<3xf32>) -> tensor<3xf32> {\n    ", b"\n    return %arg0 : tensor<3xf32>\n  }\n}\n"),
    (b"func.func @main() -> tensor<2xi32> {\n  %0 = ", b"\n  return %0 : tensor<2xi32>\n}\n"),
    (b"module {\n", b"\n}\n"),
]


@st.composite
def token_soup(draw, kind: str) -> bytes:
    vocab = vocabulary(kind)
    words = draw(st.lists(st.one_of(st.sampled_from(vocab), jaxpr_type() if kind == "jaxpr" else mlir_type()),
                          min_size=1, max_size=40))
    sep = draw(st.sampled_from([b" ", b"", b"\n"]))
    pre, post = draw(st.sampled_from(JAXPR_FRAMES if kind == "jaxpr" else MLIR_FRAMES))
    return pre + sep.join(words) + post


@st.composite
def random_bytes(draw, kind: str) -> bytes:
    data = draw(st.binary(max_size=512))
    if draw(st.booleans()):
        seed = draw(st.sampled_from(seeds(kind)))
        data = seed[:_pos(draw, seed)] + data
    return data


def inputs(kind: str):
    if kind in _CLASSES:
        return _CLASSES[kind]()
    return st.one_of(mutated(kind), mutated(kind), mutated(kind), mutated(kind), token_soup(kind),
                     random_bytes(kind))


_CLASSES = {"huge": classes.huge_program, "options": classes.options, "fork": classes.fork_plan}
