"""The fast caller in C: a call that fits the kinds a caller was made for (fastcall.py) checked,
its descriptors filled and its results made into numpy arrays without a line of Python.

fastcall.py's generated Python caller costs ~2.2 us a call, nearly all of it in the interpreter
and cffi (a kernel adding two 8-element arrays: 0.5% of the time in the library); numpy's own add
takes 0.23 us, numba's dispatcher ~0.3. This CPython extension (built at installation beside the
runtime's C objects: `python -m sprue.lowering.c_toolchain`, lowering/c_toolchain.py) does the
same per call in C: 0.12 us, the kernel included. Every call it does not take -- an argument
that is not C-contiguous, aligned and writeable (copied first), an int out of range, a deallocator
a test replaced -- goes to the Python caller, which it wraps; a result in any layout but the usual
one is unpacked by the same ResultUnpacker (the words handed over), so both paths give the same
results and raise the same errors. Where the extension is not built (an installation without a C
compiler or Python's headers) the Python caller is used as before.

What it takes (the rest keeps the Python caller): kinds Array, DynArray (rank <= MAX_RANK),
Scalar of Python float, int and bool, Const and Skip (fastcall.py). Up to MAX_ARGS arguments and
MAX_WORDS words of results, its state is on the C stack and the kernel's C interface is called
with a case per arity; beyond, up to MAX_PACKED_ARGS and MAX_HEAP_WORDS, on the heap, through the
library's packed entry (runtime/abi.py; a library without one keeps the Python caller). A status
(run-time checks: dynamic shapes' entry checks) is read first; one that is not 0, or anything
unusual about it, goes to the ResultUnpacker, which raises. Its state is the call's own:
concurrent calls share nothing; the kernel runs with the GIL
released, as cffi's calls do.

The extension also holds the Dispatcher, the base type of qjit's functions (frontend/api/qjit.py):
a call with the function's number of positional arguments, outside any trace, goes to its last
fast caller (`_mono`) with no Python frame; anything else to its `_dispatch` method. A scalar
call: 0.42 -> 0.23 us. SPRUE_FASTCALL_C=0 turns the extension off (an A/B switch).
"""
from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import os
import sys
import sysconfig
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

EXTENSION_NAME = "_sprue_fastcall"
EXTENSION_DIR = Path(__file__).resolve().parent / "_ext"
MAX_ARGS = 128
MAX_RANK = 16
MAX_WORDS = 4096
# Beyond MAX_ARGS arguments or MAX_WORDS result words a call's state is on the heap, and the kernel
# is called through the library's packed entry (runtime/abi.py): a 5,000-argument function's
# Python caller took seconds to generate and compile.
MAX_PACKED_ARGS = 1 << 16
MAX_HEAP_WORDS = 1 << 22

# argument kinds, as the C source numbers them
K_ARRAY, K_DYN, K_F64, K_I64, K_BOOL, K_CONST, K_SKIP_IS, K_SKIP_EQ, K_SKIP_SAME = range(9)
# finishes
F_LIST, F_SINGLE, F_CALL = range(3)


def _call_cases() -> str:
    """The kernel called with its result object and n descriptors, a case per n (its C type)."""
    cases = []
    for n in range(MAX_ARGS + 1):
        types = ", ".join(["void *"] * (n + 1))
        args = ", ".join(["res"] + [f"d[{i}]" for i in range(n)])
        cases.append(f"    case {n}: return ((int64_t (*)({types}))fn)({args});")
    return "\n".join(cases)


SOURCE = r"""/* sprue's fast caller (runtime/fastcall_c.py) */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#include <numpy/arrayobject.h>
#include <structmember.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ARGS @MAX_ARGS@
#define MAX_RANK @MAX_RANK@
#define MAX_WORDS @MAX_WORDS@
#define MAX_PACKED_ARGS @MAX_PACKED_ARGS@
#define MAX_HEAP_WORDS @MAX_HEAP_WORDS@
#if NPY_ABI_VERSION < 0x02000000   /* (numpy 1's field; numpy 2's accessor) */
#define PyDataType_ELSIZE(d) ((d)->elsize)
#endif
#define PASS_BY_POINTER (NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED | NPY_ARRAY_WRITEABLE)
enum { K_ARRAY, K_DYN, K_F64, K_I64, K_BOOL, K_CONST, K_SKIP_IS, K_SKIP_EQ, K_SKIP_SAME };
enum { F_LIST, F_SINGLE, F_CALL };

typedef struct {
  int kind, index, rank, cell_bytes;
  PyArray_Descr *descr;            /* arrays: the dtype (compared by identity, as `is`) */
  npy_intp shape[MAX_RANK];        /* K_ARRAY: the sizes; K_DYN: -1 for any size, else the size */
  int64_t value;                   /* K_CONST */
  PyObject *obj;                   /* K_SKIP_*: the value, or the `same` callable */
} arg_spec;

typedef struct {
  int rank, word;
  PyArray_Descr *descr;
} result_spec;

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject *dict;
  void *fn, *packed;   /* packed: the entry taking its parameters as one array, or NULL (call_kernel) */
  int nargs, nkinds, nresults, nwords, finish, status_word, stride, has_res;
  arg_spec *args;
  result_spec *results;
  PyObject *fallback, *unpacker, *free_obj, *oom, *finish_fn, *miss;
} caller;

typedef int64_t cell;   /* a rank-0 argument's value, in its dtype's bytes */

static PyObject *FREE_NAME;   /* "free", interned once */

static int64_t call_kernel(void *fn, int n, void *res, void **d) {
  switch (n) {
@CASES@
  }
  return 0;
}

static void free_capsule(PyObject *capsule) { free(PyCapsule_GetPointer(capsule, NULL)); }

/* The words as a list of Python ints (for the ResultUnpacker's general path). */
static PyObject *words_list(const int64_t *w, int n) {
  PyObject *list = PyList_New(n);
  if (!list) return NULL;
  for (int i = 0; i < n; ++i) {
    PyObject *v = PyLong_FromLongLong(w[i]);
    if (!v) { Py_DECREF(list); return NULL; }
    PyList_SET_ITEM(list, i, v);
  }
  return list;
}

/* Whether every result is in the usual layout (row-major, non-empty, not before its allocation,
   each in an allocation of its own). */
static int usual_results(caller *c, const int64_t *w) {
  if (c->status_word >= 0) {   /* a status: present, 0 and in a buffer of its own, or the general path */
    const int64_t *d = w + c->status_word;
    if (!d[0] || ((const int64_t *)(intptr_t)d[1])[d[2]]) return 0;
    for (int r = 0; r < c->nresults; ++r)
      if (w[c->results[r].word] == d[0]) return 0;
  }
  for (int r = 0; r < c->nresults; ++r) {
    const result_spec *s = &c->results[r];
    const int64_t *d = w + s->word;
    if (!d[0]) return 0;
    if (s->rank) {
      int64_t expect = 1, itemsize = PyDataType_ELSIZE(s->descr);
      for (int k = s->rank - 1; k >= 0; --k) {
        if (d[3 + k] <= 0 || d[3 + s->rank + k] != expect) return 0;
        expect *= d[3 + k];
      }
      if (d[1] - d[0] + d[2] * itemsize < 0) return 0;
    }
    for (int q = 0; q < r; ++q)   /* a shared buffer: the general path (which copies: results never alias) */
      if (w[c->results[q].word] == d[0]) return 0;
  }
  return 1;
}

/* The results of a finished call (the words), as the Python caller's `out` list. */
static PyObject *results(caller *c, const int64_t *w) {
  if (!usual_results(c, w)) {
    PyObject *words = words_list(w, c->nwords), *out;
    if (!words) return NULL;
    out = PyObject_CallMethod(c->unpacker, "unpack_words", "O", words);
    Py_DECREF(words);
    return out;
  }
  PyObject *out = PyList_New(c->nresults), *owner;
  if (!out) return NULL;
  for (int r = 0; r < c->nresults; ++r) {
    const result_spec *s = &c->results[r];
    const int64_t *d = w + s->word;
    char *data = (char *)(intptr_t)d[1] + d[2] * PyDataType_ELSIZE(s->descr);
    PyObject *item;
    if (!s->rank) {
      item = PyArray_Scalar(data, s->descr, NULL);
      if (!item) goto fail;
      PyList_SET_ITEM(out, r, item);
      continue;
    }
    npy_intp shape[MAX_RANK];
    for (int k = 0; k < s->rank; ++k) shape[k] = (npy_intp)d[3 + k];
    Py_INCREF(s->descr);   /* (NewFromDescr steals it) */
    item = PyArray_NewFromDescr(&PyArray_Type, s->descr, s->rank, shape, NULL, data, NPY_ARRAY_CARRAY, NULL);
    if (!item) goto fail;
    PyList_SET_ITEM(out, r, item);
    owner = PyCapsule_New((void *)(intptr_t)d[0], NULL, free_capsule);
    if (!owner) goto fail;
    if (PyArray_SetBaseObject((PyArrayObject *)item, owner) < 0) goto fail;
  }
  for (int r = 0; r < c->nresults; ++r)   /* rank-0 results were read into their scalars */
    if (!c->results[r].rank) free((void *)(intptr_t)w[c->results[r].word]);
  if (c->status_word >= 0) free((void *)(intptr_t)w[c->status_word]);
  return out;
fail:
  /* (unreachable in practice: out of memory making Python objects) the buffers not yet owned
     by an array leak rather than risk a double free */
  Py_DECREF(out);
  return NULL;
}

static PyObject *finish(caller *c, PyObject *out) {
  PyObject *v;
  if (!out || c->finish == F_LIST) return out;
  if (c->finish == F_SINGLE) {
    v = PyList_GET_ITEM(out, 0);
    Py_INCREF(v);
  } else {
    v = PyObject_CallOneArg(c->finish_fn, out);
  }
  Py_DECREF(out);
  return v;
}

static PyObject *fall_back(caller *c, PyObject *args) { return PyObject_CallOneArg(c->fallback, args); }

/* One call with its buffers: slots[0] the result words, then a descriptor pointer per argument
   (the packed entry's array), desc c->stride words per argument, a cell per argument. */
static PyObject *run(caller *c, PyObject *args, void **slots, int64_t *desc, cell *cells, int64_t *words) {
  void **d = slots + 1;
  int64_t status;
  int j = 0;
  for (int i = 0; i < c->nkinds; ++i) {
    const arg_spec *s = &c->args[i];
    PyObject *a = s->index >= 0 ? PyTuple_GET_ITEM(args, s->index) : NULL;
    int64_t *dd = desc + (size_t)j * c->stride;
    switch (s->kind) {
    case K_SKIP_IS:
      if (a != s->obj) return fall_back(c, args);
      continue;
    case K_SKIP_EQ:
      if (a != s->obj) {
        int eq;
        if (Py_TYPE(a) != Py_TYPE(s->obj)) return fall_back(c, args);
        eq = PyObject_RichCompareBool(a, s->obj, Py_EQ);
        if (eq < 0) PyErr_Clear();
        if (eq != 1) return fall_back(c, args);
      }
      continue;
    case K_SKIP_SAME: {
      PyObject *ok = PyObject_CallOneArg(s->obj, a);
      int t = ok ? PyObject_IsTrue(ok) : -1;
      Py_XDECREF(ok);
      if (t < 0) PyErr_Clear();
      if (t != 1) return fall_back(c, args);
      continue;
    }
    case K_ARRAY:
    case K_DYN: {
      PyArrayObject *arr = (PyArrayObject *)a;
      int64_t stride = 1;
      if (Py_TYPE(a) != &PyArray_Type || PyArray_DESCR(arr) != s->descr || PyArray_NDIM(arr) != s->rank ||
          (PyArray_FLAGS(arr) & PASS_BY_POINTER) != PASS_BY_POINTER)
        return fall_back(c, args);
      for (int k = 0; k < s->rank; ++k)
        if (s->shape[k] >= 0 && PyArray_DIM(arr, k) != s->shape[k]) return fall_back(c, args);
      dd[0] = dd[1] = (int64_t)(intptr_t)PyArray_DATA(arr);
      dd[2] = 0;
      for (int k = s->rank - 1; k >= 0; --k) {
        dd[3 + k] = PyArray_DIM(arr, k);
        dd[3 + s->rank + k] = stride;
        stride *= PyArray_DIM(arr, k);
      }
      break;
    }
    case K_F64:
      if (Py_TYPE(a) != &PyFloat_Type) return fall_back(c, args);
      { double v = PyFloat_AS_DOUBLE(a); memcpy(&cells[j], &v, sizeof v); }
      goto scalar;
    case K_I64: {
      int overflow;
      long long v;
      if (Py_TYPE(a) != &PyLong_Type) return fall_back(c, args);
      v = PyLong_AsLongLongAndOverflow(a, &overflow);
      if (overflow || (v == -1 && PyErr_Occurred())) { PyErr_Clear(); return fall_back(c, args); }
      cells[j] = v;
      goto scalar;
    }
    case K_BOOL:
      if (a != Py_True && a != Py_False) return fall_back(c, args);
      { unsigned char v = a == Py_True; memcpy(&cells[j], &v, 1); }
      goto scalar;
    case K_CONST:
      if (s->cell_bytes == 8) cells[j] = s->value;
      else { int32_t v = (int32_t)s->value; memcpy(&cells[j], &v, 4); }
      goto scalar;
    }
    d[j] = dd;
    ++j;
    continue;
  scalar:
    dd[0] = dd[1] = (int64_t)(intptr_t)&cells[j];
    dd[2] = 0;
    d[j] = dd;
    ++j;
  }
  memset(words, 0, (size_t)c->nwords * sizeof *words);
  slots[0] = words;
  Py_BEGIN_ALLOW_THREADS
  if (c->has_res)
    status = c->packed ? ((int64_t (*)(void **))c->packed)(slots) : call_kernel(c->fn, j, words, d);
  else if (c->packed)   /* (no result object: the parameters are the descriptors alone) */
    status = ((int64_t (*)(void **))c->packed)(d);
  else
    status = j ? call_kernel(c->fn, j - 1, d[0], d + 1) : ((int64_t (*)(void))c->fn)();
  Py_END_ALLOW_THREADS
  if (status) {
    PyObject *exc = PyObject_CallFunction(c->oom, "L", (long long)status);
    if (exc) { PyErr_SetObject((PyObject *)Py_TYPE(exc), exc); Py_DECREF(exc); }
    return NULL;
  }
  return finish(c, c->nresults || c->status_word >= 0 ? results(c, words) : PyList_New(0));
}

static PyObject *caller_call(PyObject *self, PyObject *const *argv, size_t nargsf, PyObject *kwnames) {
  caller *c = (caller *)self;
  PyObject *args;
  if (PyVectorcall_NARGS(nargsf) != 1 || kwnames) {
    PyErr_SetString(PyExc_TypeError, "a fast caller takes the tuple of the call's arguments");
    return NULL;
  }
  args = argv[0];
  if (!PyTuple_CheckExact(args) || PyTuple_GET_SIZE(args) != c->nargs) { Py_INCREF(c->miss); return c->miss; }
  {   /* a deallocator replaced (tests count frees): the Python caller, which calls it */
    PyObject *free_now = PyObject_GetAttr(c->unpacker, FREE_NAME);
    int same = free_now == c->free_obj;
    Py_XDECREF(free_now);
    if (!same) return fall_back(c, args);
  }
  if (c->nkinds <= MAX_ARGS && c->nwords <= MAX_WORDS) {   /* the usual call: its state on the C stack */
    void *slots[MAX_ARGS + 1];
    int64_t desc[MAX_ARGS * (3 + 2 * MAX_RANK)];
    cell cells[MAX_ARGS];
    int64_t words[MAX_WORDS];
    return run(c, args, slots, desc, cells, words);
  }
  {   /* thousands of arguments or result words: the state on the heap, sized for this caller */
    size_t n = (size_t)c->nkinds, stride = (size_t)c->stride, nwords = (size_t)(c->nwords ? c->nwords : 1);
    char *block = PyMem_Malloc((n + 1) * sizeof(void *) + n * stride * 8 + n * sizeof(cell) + nwords * 8);
    PyObject *out;
    if (!block) return PyErr_NoMemory();
    out = run(c, args, (void **)block, (int64_t *)(block + (n + 1) * sizeof(void *)),
              (cell *)(block + (n + 1) * sizeof(void *) + n * stride * 8),
              (int64_t *)(block + (n + 1) * sizeof(void *) + n * stride * 8 + n * sizeof(cell)));
    PyMem_Free(block);
    return out;
  }
}

static void caller_dealloc(PyObject *self) {
  caller *c = (caller *)self;
  PyObject_GC_UnTrack(self);
  for (int i = 0; i < c->nkinds; ++i) { Py_XDECREF(c->args[i].descr); Py_XDECREF(c->args[i].obj); }
  for (int r = 0; r < c->nresults; ++r) Py_XDECREF(c->results[r].descr);
  PyMem_Free(c->args);
  PyMem_Free(c->results);
  Py_XDECREF(c->dict); Py_XDECREF(c->fallback); Py_XDECREF(c->unpacker); Py_XDECREF(c->free_obj);
  Py_XDECREF(c->oom); Py_XDECREF(c->finish_fn); Py_XDECREF(c->miss);
  PyObject_GC_Del(self);
}

static int caller_traverse(PyObject *self, visitproc visit, void *arg) {
  caller *c = (caller *)self;
  Py_VISIT(c->dict); Py_VISIT(c->fallback); Py_VISIT(c->unpacker); Py_VISIT(c->free_obj);
  Py_VISIT(c->oom); Py_VISIT(c->finish_fn);
  for (int i = 0; i < c->nkinds; ++i) Py_VISIT(c->args[i].obj);
  return 0;
}

static PyObject *caller_tp_call(PyObject *self, PyObject *args, PyObject *kwargs) {
  return PyVectorcall_Call(self, args, kwargs);
}

static PyTypeObject CallerType = {
  PyVarObject_HEAD_INIT(NULL, 0)
  .tp_name = "_sprue_fastcall.Caller",
  .tp_basicsize = sizeof(caller),
  .tp_dealloc = caller_dealloc,
  .tp_vectorcall_offset = offsetof(caller, vectorcall),
  .tp_call = caller_tp_call,
  .tp_dictoffset = offsetof(caller, dict),
  .tp_getattro = PyObject_GenericGetAttr,
  .tp_setattro = PyObject_GenericSetAttr,
  .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
  .tp_traverse = caller_traverse,
};

/* make(fn, packed, has_res, nargs, kinds, results, nwords, status_word, finish, finish_fn, fallback, unpacker, free, oom,
   miss): kinds: (kind, index, descr or None, shape tuple or None, value, obj, cell_bytes) per kind;
   results: (descr, rank, word) per result (the status, at status_word, not among them; -1: none). */
static PyObject *make(PyObject *mod, PyObject *a) {
  PyObject *fn, *packed, *kinds, *res, *finish_fn, *fallback, *unpacker, *free_obj, *oom, *miss;
  int nargs, nwords, status_word, fin, has_res;
  caller *c;
  if (!PyArg_ParseTuple(a, "OOiiO!O!iiiOOOOOO", &fn, &packed, &has_res, &nargs, &PyTuple_Type, &kinds, &PyTuple_Type,
                        &res, &nwords, &status_word, &fin, &finish_fn, &fallback, &unpacker, &free_obj, &oom, &miss))
    return NULL;
  if ((PyTuple_GET_SIZE(kinds) > MAX_ARGS && packed == Py_None) || PyTuple_GET_SIZE(kinds) > MAX_PACKED_ARGS
      || nwords > MAX_HEAP_WORDS)
    return PyErr_Format(PyExc_ValueError, "too many arguments or results for the fast caller");
  c = PyObject_GC_New(caller, &CallerType);
  if (!c) return NULL;
  c->vectorcall = caller_call;
  c->dict = NULL;
  c->fn = PyLong_AsVoidPtr(fn);
  c->packed = packed == Py_None ? NULL : PyLong_AsVoidPtr(packed);
  c->has_res = has_res;
  c->stride = 3;
  c->nargs = nargs;
  c->nkinds = (int)PyTuple_GET_SIZE(kinds);
  c->nresults = (int)PyTuple_GET_SIZE(res);
  c->nwords = nwords;
  c->status_word = status_word;
  c->finish = fin;
  c->args = PyMem_Calloc(c->nkinds ? c->nkinds : 1, sizeof(arg_spec));
  c->results = PyMem_Calloc(c->nresults ? c->nresults : 1, sizeof(result_spec));
  c->finish_fn = finish_fn; c->fallback = fallback; c->unpacker = unpacker; c->free_obj = free_obj;
  c->oom = oom; c->miss = miss;
  Py_INCREF(finish_fn); Py_INCREF(fallback); Py_INCREF(unpacker); Py_INCREF(free_obj); Py_INCREF(oom);
  Py_INCREF(miss);
  if (!c->args || !c->results) { Py_DECREF(c); return PyErr_NoMemory(); }
  for (int i = 0; i < c->nkinds; ++i) {
    PyObject *k = PyTuple_GET_ITEM(kinds, i), *descr, *shape, *obj;
    arg_spec *s = &c->args[i];
    long long value;
    if (!PyArg_ParseTuple(k, "iiOOLOi", &s->kind, &s->index, &descr, &shape, &value, &obj, &s->cell_bytes)) {
      Py_DECREF(c);
      return NULL;
    }
    s->value = value;
    if (descr != Py_None) { Py_INCREF(descr); s->descr = (PyArray_Descr *)descr; }
    /* (a skipped argument's value may be None itself: K_SKIP_EQ reads its type) */
    if (obj != Py_None || s->kind >= K_SKIP_IS) { Py_INCREF(obj); s->obj = obj; }
    if (shape != Py_None) {
      s->rank = (int)PyTuple_GET_SIZE(shape);
      if (s->rank > MAX_RANK) { Py_DECREF(c); return PyErr_Format(PyExc_ValueError, "rank above %d", MAX_RANK); }
      for (int r = 0; r < s->rank; ++r) s->shape[r] = (npy_intp)PyLong_AsLongLong(PyTuple_GET_ITEM(shape, r));
      if (3 + 2 * s->rank > c->stride) c->stride = 3 + 2 * s->rank;
    }
  }
  for (int r = 0; r < c->nresults; ++r) {
    PyObject *descr;
    result_spec *s = &c->results[r];
    if (!PyArg_ParseTuple(PyTuple_GET_ITEM(res, r), "Oii", &descr, &s->rank, &s->word)) { Py_DECREF(c); return NULL; }
    if (s->rank > MAX_RANK) { Py_DECREF(c); return PyErr_Format(PyExc_ValueError, "rank above %d", MAX_RANK); }
    Py_INCREF(descr);
    s->descr = (PyArray_Descr *)descr;
  }
  PyObject_GC_Track((PyObject *)c);
  return (PyObject *)c;
}

/* Dispatcher: a base type for qjit's function objects (frontend/api/qjit.py). A call with exactly
   `_nparams` positional arguments, outside any trace, goes to `_mono` (the last fast caller) with
   the tuple of its arguments; anything else, or MISS, to the object's `_dispatch` method, the
   Python path. */
static PyObject *TRACE_STATE, *MISS_OBJ, *STACK_NAME, *DISPATCH_NAME;

typedef struct {
  PyObject_HEAD
  PyObject *mono;
  Py_ssize_t nparams;
} dispatcher;

static PyObject *dispatcher_call(PyObject *self, PyObject *args, PyObject *kwargs) {
  dispatcher *d = (dispatcher *)self;
  if ((!kwargs || !PyDict_GET_SIZE(kwargs)) && PyTuple_GET_SIZE(args) == d->nparams && d->mono && TRACE_STATE) {
    PyObject *stack = PyObject_GetAttr(TRACE_STATE, STACK_NAME);
    int idle = stack && PyList_CheckExact(stack) && PyList_GET_SIZE(stack) == 0;
    Py_XDECREF(stack);
    if (!stack) PyErr_Clear();
    if (idle) {
      PyObject *mono = d->mono, *res;
      Py_INCREF(mono);
      res = PyObject_CallOneArg(mono, args);
      Py_DECREF(mono);
      if (res != MISS_OBJ) return res;
      Py_DECREF(res);
    }
  }
  {
    PyObject *method = PyObject_GetAttr(self, DISPATCH_NAME), *res;
    if (!method) return NULL;
    res = PyObject_Call(method, args, kwargs);
    Py_DECREF(method);
    return res;
  }
}

/* (a Python subclass's type is visited and released by CPython's subtype_traverse/_dealloc) */
static int dispatcher_traverse(PyObject *self, visitproc visit, void *arg) {
  Py_VISIT(((dispatcher *)self)->mono);
  return 0;
}

static int dispatcher_clear(PyObject *self) {
  Py_CLEAR(((dispatcher *)self)->mono);
  return 0;
}

static void dispatcher_dealloc(PyObject *self) {
  PyObject_GC_UnTrack(self);
  dispatcher_clear(self);
  Py_TYPE(self)->tp_free(self);
}

static PyMemberDef dispatcher_members[] = {
  {"_mono", T_OBJECT, offsetof(dispatcher, mono), 0, "the last fast caller, tried first"},
  {"_nparams", T_PYSSIZET, offsetof(dispatcher, nparams), 0, "how many parameters the function has"},
  {NULL}};

static PyTypeObject DispatcherType = {
  PyVarObject_HEAD_INIT(NULL, 0)
  .tp_name = "_sprue_fastcall.Dispatcher",
  .tp_basicsize = sizeof(dispatcher),
  .tp_dealloc = dispatcher_dealloc,
  .tp_call = dispatcher_call,
  .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
  .tp_traverse = dispatcher_traverse,
  .tp_clear = dispatcher_clear,
  .tp_members = dispatcher_members,
  .tp_new = PyType_GenericNew,
};

/* setup(trace_state, miss): the thread-local whose `stack` is empty outside traces, and MISS. */
static PyObject *setup(PyObject *mod, PyObject *a) {
  PyObject *state, *miss;
  if (!PyArg_ParseTuple(a, "OO", &state, &miss)) return NULL;
  Py_XSETREF(TRACE_STATE, Py_NewRef(state));
  Py_XSETREF(MISS_OBJ, Py_NewRef(miss));
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {{"make", make, METH_VARARGS, "a fast caller (runtime/fastcall_c.py)"},
                                {"setup", setup, METH_VARARGS, "the Dispatcher's trace state and MISS"},
                                {NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_sprue_fastcall", NULL, -1, methods};

PyMODINIT_FUNC PyInit__sprue_fastcall(void) {
  PyObject *m;
  import_array();
  if (PyType_Ready(&CallerType) < 0 || PyType_Ready(&DispatcherType) < 0) return NULL;
  if (!FREE_NAME && !(FREE_NAME = PyUnicode_InternFromString("free"))) return NULL;
  if (!STACK_NAME && !(STACK_NAME = PyUnicode_InternFromString("stack"))) return NULL;
  if (!DISPATCH_NAME && !(DISPATCH_NAME = PyUnicode_InternFromString("_dispatch"))) return NULL;
  m = PyModule_Create(&module);
  if (!m) return NULL;
  Py_INCREF(&DispatcherType);
  if (PyModule_AddObject(m, "Dispatcher", (PyObject *)&DispatcherType) < 0) { Py_DECREF(&DispatcherType); Py_DECREF(m); return NULL; }
  return m;
}
""".replace("@MAX_ARGS@", str(MAX_ARGS)).replace("@MAX_RANK@", str(MAX_RANK)).replace(
    "@MAX_WORDS@", str(MAX_WORDS)).replace("@CASES@", _call_cases()).replace(
    "@MAX_PACKED_ARGS@", str(MAX_PACKED_ARGS)).replace("@MAX_HEAP_WORDS@", str(MAX_HEAP_WORDS))


def dispatcher_base(trace_state: Any, miss: Any) -> type | None:
    """The C Dispatcher type (its trace state and MISS set), for qjit's functions to derive from;
    None where the extension is not built."""
    ext = extension()
    if ext is None:
        return None
    ext.setup(trace_state, miss)
    return ext.Dispatcher


def extension_path() -> Path:
    return EXTENSION_DIR / (EXTENSION_NAME + (sysconfig.get_config_var("EXT_SUFFIX") or ".so"))


def build_command(compiler: Sequence[str], source: Path, target: Path) -> list[str]:
    """The command compiling SOURCE into the extension (Python's and numpy's headers)."""
    return [*compiler, "-shared", "-fPIC", "-O2", f"-I{sysconfig.get_paths()['include']}", f"-I{np.get_include()}",
            "-o", str(target), str(source)]


@functools.lru_cache(maxsize=None)
def extension() -> Any:
    """The built extension module, or None (not built, built for another Python or numpy, or
    SPRUE_FASTCALL_C=0: an A/B switch, read once)."""
    path = extension_path()
    if os.environ.get("SPRUE_FASTCALL_C", "1").strip().lower() in ("0", "off", "false", "no") or not path.is_file():
        return None
    loader = importlib.machinery.ExtensionFileLoader(EXTENSION_NAME, str(path))
    spec = importlib.util.spec_from_file_location(EXTENSION_NAME, path, loader=loader)
    if spec is None:
        return None
    try:
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
    except ImportError:   # (another interpreter's or numpy's build: the Python caller does the work)
        return None
    sys.modules.setdefault(EXTENSION_NAME, module)
    return module


def takes(nkinds: int, rank: int, nwords: int) -> bool:
    """Whether `make` takes a caller of `nkinds` kinds, arguments and results of rank up to
    `rank` and a result object of `nwords` words (the extension built; beyond MAX_ARGS kinds, a
    library with a packed entry)."""
    return nkinds <= MAX_PACKED_ARGS and rank <= MAX_RANK and nwords <= MAX_HEAP_WORDS and extension() is not None


def c_caller(cf: Any, kinds: Sequence[tuple], nargs: int, finish: tuple[int, Any], fallback: Callable[[tuple], Any],
             miss: Any, allocation_error: Callable[[int], BaseException]) -> Any:
    """The C caller of `cf` for these kinds (each as `make` takes it: fastcall._c_kinds), `nargs`
    entries of the argument tuple and `finish` (F_LIST, F_SINGLE or F_CALL, and the callable),
    wrapping the Python caller `fallback`; None where the extension is not built or `cf`'s results
    are not ones it reads (module doc)."""
    ext = extension()
    if ext is None:
        return None
    unpacker = cf._unpacker
    readers = unpacker._readers if cf._result_type is not None else ()
    status_word = -1
    if unpacker._messages is not None:   # (run-time checks: their status first)
        status_word, readers = readers[0].word, readers[1:]
    results = tuple((reader.spec.dtype, reader.spec.rank, reader.word) for reader in readers)
    address = int(cf._ffi.cast("uintptr_t", cf._fn))
    packed = cf.packed_address() if len(kinds) > MAX_ARGS else None
    nwords = unpacker._nwords if cf._result_type is not None else 0
    try:
        return ext.make(address, packed, int(cf._result_type is not None), nargs, tuple(kinds), results, nwords, status_word, finish[0], finish[1], fallback,
                        unpacker, unpacker.free, allocation_error, miss)
    except ValueError:   # (more arguments, words or a higher rank than `make` takes)
        return None


__all__ = ["EXTENSION_NAME", "SOURCE", "build_command", "c_caller", "dispatcher_base", "extension", "extension_path",
           "takes"]
