"""cffi's C-level operations, for the per-call path.

ffi.new, ffi.cast, ffi.from_buffer, ffi.gc and ffi.unpack are Python
wrappers (cffi/api.py) that accept a C type as a string and then call these
built-ins of the _cffi_backend extension module with a ctype object. The
runtime resolves every ctype once at load time (ffi.typeof), so it calls the
built-ins directly and saves a Python frame per operation, which is a large
part of a small call's overhead. They are the same functions the FFI object
uses (ffi._backend is this module).
"""

from __future__ import annotations

import _cffi_backend

__all__ = ["newp", "cast", "from_buffer", "gcp", "unpack", "buffer"]

newp = _cffi_backend.newp  # newp(ctype, init): ffi.new
cast = _cffi_backend.cast  # cast(ctype, value): ffi.cast
from_buffer = _cffi_backend.from_buffer  # from_buffer(char_array_ctype, obj, require_writable)
gcp = _cffi_backend.gcp  # gcp(cdata, destructor): ffi.gc
unpack = _cffi_backend.unpack  # unpack(cdata, length): ffi.unpack
buffer = _cffi_backend.buffer  # buffer(cdata, size): ffi.buffer
