"""Reading `jax.export`'s serialized artifacts (`exported.serialize()`, a `.jax_exported` file):
a flatbuffer whose table `Exported` (JAX's schema, jax/_src/export/serialization.fbs) holds the
StableHLO module as a portable artifact (VHLO bytecode), the argument and result types (symbolic
dimensions by name), the platforms and the calling convention.

The flatbuffer is read here without the `flatbuffers` package: a buffer starts with the offset of
its root table; a table starts with the (signed) distance back to its vtable, whose entries are
the offsets of the table's fields by slot (0: absent); a string or vector field holds the
distance to its length (u32) followed by its elements. (FlatBuffers' "Internals" document.)
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from sprue.base.errors import ParseError, UnsupportedError

# Exported's fields by slot (serialization.fbs, in order of declaration)
_SERIALIZATION_VERSION, _FUNCTION_NAME, _IN_TREE, _IN_AVALS, _OUT_TREE, _OUT_AVALS, _NR_DEVICES = range(7)
_PLATFORMS, _ORDERED_EFFECTS, _UNORDERED_EFFECTS = 9, 10, 11
_MLIR_MODULE, _CALLING_CONVENTION = 13, 14
_NR_DEVICES_LONG = 18
# AbstractValue's: kind (0: shaped array, 1: token), shape (strings), dtype (the DType enum)
_AVAL_KIND, _AVAL_SHAPE, _AVAL_DTYPE = 0, 1, 2
DTYPES = {0: "bool", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "uint8", 6: "uint16", 7: "uint32",
          8: "uint64", 9: "float16", 10: "float32", 11: "float64", 12: "complex64", 13: "complex128",
          14: "bfloat16"}

# the calling conventions whose main function takes just the arguments when there is one platform
# and no ordered effects (jax/_src/export/_export.py: versions 9 and 10 are current)
SUPPORTED_CALLING_CONVENTIONS = range(9, 11)


class JaxExportedError(ParseError):
    """A file that is not a serialized jax.export artifact sprue can read."""


class JaxExportedUnsupportedError(JaxExportedError, UnsupportedError):
    """A well-formed artifact that needs what sprue does not do (several devices, effects, no CPU)."""


@dataclass
class Exported:
    function_name: str
    in_avals: list[tuple[tuple[str, ...], str]]    # (shape as JAX prints each dim, dtype name)
    out_avals: list[tuple[tuple[str, ...], str]]
    platforms: list[str]
    nr_devices: int
    calling_convention_version: int
    mlir_module: bytes                              # the StableHLO portable artifact


class _Table:
    def __init__(self, buf: bytes, pos: int, path: str):
        self.buf, self.pos, self.path = buf, pos, path
        vtable = pos - self._i32(pos)
        self.vtable = vtable
        self.vtable_len = self._u16(vtable)

    def _check(self, at: int, size: int) -> None:
        if at < 0 or at + size > len(self.buf):
            raise JaxExportedError(f"{self.path}: not a jax.export artifact (an offset {at} points outside the"
                                   f" {len(self.buf)} bytes of the file)")

    def _u16(self, at: int) -> int:
        self._check(at, 2)
        return struct.unpack_from("<H", self.buf, at)[0]

    def _i32(self, at: int) -> int:
        self._check(at, 4)
        return struct.unpack_from("<i", self.buf, at)[0]

    def _u32(self, at: int) -> int:
        self._check(at, 4)
        return struct.unpack_from("<I", self.buf, at)[0]

    def _field(self, slot: int) -> int | None:
        entry = 4 + 2 * slot
        if entry >= self.vtable_len:
            return None
        off = self._u16(self.vtable + entry)
        return self.pos + off if off else None

    def scalar(self, slot: int, fmt: str, default=0):
        at = self._field(slot)
        if at is None:
            return default
        self._check(at, struct.calcsize(fmt))
        return struct.unpack_from("<" + fmt, self.buf, at)[0]

    def _target(self, slot: int) -> int | None:
        at = self._field(slot)
        return None if at is None else at + self._u32(at)

    def bytes_(self, slot: int) -> bytes:
        at = self._target(slot)
        if at is None:
            return b""
        n = self._u32(at)
        self._check(at + 4, n)
        return bytes(self.buf[at + 4:at + 4 + n])

    def string(self, slot: int) -> str:
        return self.bytes_(slot).decode("utf-8", errors="replace")

    def vector(self, slot: int) -> list[int]:
        """The positions of a vector of offsets' elements (tables or strings)."""
        at = self._target(slot)
        if at is None:
            return []
        n = self._u32(at)
        self._check(at + 4, 4 * n)
        return [at + 4 + 4 * k + self._u32(at + 4 + 4 * k) for k in range(n)]

    def strings(self, slot: int) -> list[str]:
        out = []
        for at in self.vector(slot):
            n = self._u32(at)
            self._check(at + 4, n)
            out.append(bytes(self.buf[at + 4:at + 4 + n]).decode("utf-8", errors="replace"))
        return out

    def tables(self, slot: int) -> list["_Table"]:
        return [_Table(self.buf, at, self.path) for at in self.vector(slot)]


def _aval(t: _Table) -> tuple[tuple[str, ...], str]:
    if t.scalar(_AVAL_KIND, "b") != 0:
        raise JaxExportedUnsupportedError(f"{t.path}: an argument or result is a token (ordered effects);"
                                          f" sprue compiles functions of arrays only")
    code = t.scalar(_AVAL_DTYPE, "b")
    return tuple(t.strings(_AVAL_SHAPE)), DTYPES.get(code, f"dtype #{code}")


def read_exported(data: bytes, path: str = "<jax_exported>") -> Exported:
    """The fields of a serialized jax.export artifact that sprue uses."""
    if len(data) < 8:
        raise JaxExportedError(f"{path}: not a jax.export artifact ({len(data)} bytes)")
    try:
        root = _Table(data, struct.unpack_from("<I", data, 0)[0], path)
        nr_devices = root.scalar(_NR_DEVICES, "h", 0) or root.scalar(_NR_DEVICES_LONG, "I", 0) or 1
        exported = Exported(
            function_name=root.string(_FUNCTION_NAME), in_avals=[_aval(t) for t in root.tables(_IN_AVALS)],
            out_avals=[_aval(t) for t in root.tables(_OUT_AVALS)], platforms=root.strings(_PLATFORMS),
            nr_devices=nr_devices, calling_convention_version=root.scalar(_CALLING_CONVENTION, "H"),
            mlir_module=root.bytes_(_MLIR_MODULE))
        effects = len(root.vector(_ORDERED_EFFECTS))
    except (struct.error, UnicodeDecodeError) as e:
        raise JaxExportedError(f"{path}: not a jax.export artifact ({e})") from None
    _check_supported(exported, effects, path)
    return exported


def _check_supported(exp: Exported, ordered_effects: int, path: str) -> None:
    if not exp.mlir_module.startswith(b"ML\xefR"):
        raise JaxExportedError(f"{path}: not a jax.export artifact (its module is not MLIR bytecode)")
    if "cpu" not in exp.platforms:
        raise JaxExportedUnsupportedError(
            f"{path}: exported for {', '.join(exp.platforms) or 'no platform'}; sprue compiles for the CPU:"
            f" export with jax.export.export(jax.jit(f), platforms=['cpu'])")
    if len(exp.platforms) != 1:
        raise JaxExportedUnsupportedError(
            f"{path}: exported for several platforms ({', '.join(exp.platforms)}), so its main function takes a"
            f" platform index first; export for the CPU alone (platforms=['cpu'])")
    if exp.nr_devices != 1:
        raise JaxExportedUnsupportedError(f"{path}: exported for {exp.nr_devices} devices; sprue compiles"
                                          f" single-device programs")
    if ordered_effects:
        raise JaxExportedUnsupportedError(f"{path}: the function has ordered effects (its main function passes"
                                          f" tokens); sprue compiles pure functions")
    if exp.calling_convention_version not in SUPPORTED_CALLING_CONVENTIONS:
        raise JaxExportedUnsupportedError(
            f"{path}: calling convention version {exp.calling_convention_version}; sprue reads versions"
            f" {SUPPORTED_CALLING_CONVENTIONS.start} to {SUPPORTED_CALLING_CONVENTIONS.stop - 1} (JAX 0.4.31 and"
            f" later)")


__all__ = ["Exported", "JaxExportedError", "JaxExportedUnsupportedError", "read_exported"]
