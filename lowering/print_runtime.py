"""The print routines of sprue.debug.print (rules_debug.py), C linked into a library that calls
them, so that a C host's kernel prints as the Python one does.

Each value is formatted as numpy's `str` formats it, with numpy's default print options: floats
in positional notation to at most 8 fractional digits, or in scientific notation when the
largest magnitude is 1e8 or more, the smallest non-zero under 1e-4 or their ratio over 1e3
(numpy's FloatingFormat, 'maxprec'), each the shortest that reads back as the same value (found
by printf at growing precision, read back with strtod/strtof, for numpy's Dragon4), columns
padded to one width, rows wrapped at 75 characters, and arrays of over 1,000 elements summarized
with `...` after 3 items per axis; a 0-d array as its scalar (Python's repr of a float). A format
spec (`{x:.3f}`) formats a scalar as Python's format() does. A line is built in a buffer of the
calling thread and written with one fwrite, so lines from several threads do not interleave."""
from __future__ import annotations

from pathlib import Path

PRINT_SOURCE = "sprue_print.c"
PRINT_SYMBOL_PREFIX = "_mlir_ciface_sprue_print_"

PRINT_C = r"""/* sprue.debug.print's routines (lowering/print_runtime.py), called through MLIR's C interface. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#define SPRUE_TLS __thread
#else
#define SPRUE_TLS _Thread_local
#endif

typedef struct { void *allocated; void *aligned; int64_t offset; int64_t dims[]; } sprue_ranked;

typedef struct { char *p; size_t n, cap; } sprue_str;

static SPRUE_TLS sprue_str sprue_line;

static void str_put(sprue_str *s, const char *t, size_t n) {
  if (s->n + n + 1 > s->cap) {
    size_t cap = s->cap ? s->cap : 256;
    while (s->n + n + 1 > cap) cap *= 2;
    char *p = realloc(s->p, cap);
    if (!p) return;   /* out of memory: the text is cut short, nothing else happens */
    s->p = p; s->cap = cap;
  }
  memcpy(s->p + s->n, t, n);
  s->n += n;
  s->p[s->n] = 0;
}
static void str_cat(sprue_str *s, const char *t) { str_put(s, t, strlen(t)); }
static void str_spaces(sprue_str *s, int64_t k) { while (k-- > 0) str_put(s, " ", 1); }

/* -- one number ------------------------------------------------------------------------------ */
enum { K_F64, K_F32, K_I64, K_U64, K_BOOL };

/* The shortest decimal digits that read back as x (finite, non-negative): digits[] without a
   point, *e10 the exponent of the first digit. */
static void shortest(double x, int f32, char *digits, int *e10) {
  char buf[48];
  int p;
  for (p = 1; p <= 17; p++) {
    snprintf(buf, sizeof buf, "%.*e", p - 1, x);
    if (f32 ? (strtof(buf, NULL) == (float)x) : (strtod(buf, NULL) == x)) break;
  }
  int n = 0;
  char *c = buf;
  for (; *c && *c != 'e'; c++) if (*c >= '0' && *c <= '9') digits[n++] = *c;
  while (n > 1 && digits[n - 1] == '0') n--;
  digits[n] = 0;
  *e10 = atoi(c + 1);
}

/* x in positional notation, shortest, at most maxfrac fractional digits (-1: no limit), with a
   point and trailing zeros trimmed ("1.", "2.5"; numpy's trim='.'). */
static void positional(double x, int f32, int maxfrac, char *out) {
  char digits[32];
  int e, neg = signbit(x) != 0;
  double a = fabs(x);
  shortest(a, f32, digits, &e);
  int n = (int)strlen(digits), frac = n - 1 - e;
  char *o = out;
  if (neg) *o++ = '-';
  if (maxfrac >= 0 && frac > maxfrac) {
    snprintf(o, 64, "%.*f", maxfrac, a);
    size_t k = strlen(o);
    while (k && o[k - 1] == '0') o[--k] = 0;
    return;
  }
  if (e >= 0) {
    for (int i = 0; i <= e; i++) *o++ = i < n ? digits[i] : '0';
    *o++ = '.';
    for (int i = e + 1; i < n; i++) *o++ = digits[i];
  } else {
    *o++ = '0'; *o++ = '.';
    for (int i = 0; i < -e - 1; i++) *o++ = '0';
    for (int i = 0; i < n; i++) *o++ = digits[i];
  }
  *o = 0;
}

/* x in scientific notation: the mantissa's shortest digits, at most maxfrac fractional ones
   (-1: no limit), then padded with zeros to minfrac; the exponent with at least expdigits digits. */
static void scientific(double x, int f32, int maxfrac, int minfrac, int expdigits, char *out) {
  char digits[32];
  int e, neg = signbit(x) != 0;
  double a = fabs(x);
  shortest(a, f32, digits, &e);
  int n = (int)strlen(digits);
  if (maxfrac >= 0 && n - 1 > maxfrac) {
    char buf[48];
    snprintf(buf, sizeof buf, "%.*e", maxfrac, a);
    n = 0;
    char *c = buf;
    for (; *c && *c != 'e'; c++) if (*c >= '0' && *c <= '9') digits[n++] = *c;
    while (n > 1 && digits[n - 1] == '0') n--;
    digits[n] = 0;
    e = atoi(c + 1);
  }
  char *o = out;
  if (neg) *o++ = '-';
  *o++ = digits[0];
  *o++ = '.';
  int frac = 0;
  for (int i = 1; i < n; i++, frac++) *o++ = digits[i];
  for (; frac < minfrac; frac++) *o++ = '0';
  snprintf(o, 16, "e%c%0*d", e < 0 ? '-' : '+', expdigits, e < 0 ? -e : e);
}

/* A scalar as Python's repr / numpy's scalar str: "1.0", "0.001", "1e-05", "1.5e+16", "inf". */
static void scalar_float(double x, int f32, char *out) {
  if (isnan(x)) { strcpy(out, "nan"); return; }
  if (isinf(x)) { strcpy(out, x < 0 ? "-inf" : "inf"); return; }
  double a = fabs(x);
  if (a == 0 || (a >= 1e-4 && a < 1e16)) {
    positional(x, f32, -1, out);
    size_t k = strlen(out);
    if (out[k - 1] == '.') strcpy(out + k, "0");
    return;
  }
  scientific(x, f32, -1, 0, 2, out);
  char *dot = strchr(out, '.');   /* "1.e-05" -> "1e-05" */
  if (dot && dot[1] == 'e') memmove(dot, dot + 1, strlen(dot));
}

/* -- a spec: Python's [[fill]align][sign][#][0][width][.precision][type] ----------------------- */
typedef struct { char fill, align, sign, type; int alt, zero, width, precision; } sprue_spec;

static int parse_spec(const char *s, size_t n, sprue_spec *sp) {
  size_t i = 0;
  sp->fill = ' '; sp->align = 0; sp->sign = '-'; sp->type = 0;
  sp->alt = sp->zero = sp->width = 0; sp->precision = -1;
  if (n >= 2 && strchr("<>^=", s[1])) { sp->fill = s[0]; sp->align = s[1]; i = 2; }
  else if (n >= 1 && strchr("<>^=", s[0])) { sp->align = s[0]; i = 1; }
  if (i < n && strchr("+- ", s[i])) sp->sign = s[i++];
  if (i < n && s[i] == '#') { sp->alt = 1; i++; }
  if (i < n && s[i] == '0') { sp->zero = 1; i++; }
  while (i < n && s[i] >= '0' && s[i] <= '9') sp->width = sp->width * 10 + (s[i++] - '0');
  if (i < n && s[i] == '.') {
    i++;
    sp->precision = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') sp->precision = sp->precision * 10 + (s[i++] - '0');
  }
  if (i < n) sp->type = s[i++];
  if (sp->zero && !sp->align) { sp->fill = '0'; sp->align = '='; }
  return i == n;
}

/* body (digits, without a sign) padded as the spec says, into out */
static void pad(const sprue_spec *sp, int neg, const char *prefix, const char *body, char *out, int numeric) {
  char sign[2] = {0, 0};
  if (neg) sign[0] = '-';
  else if (numeric && sp->sign == '+') sign[0] = '+';
  else if (numeric && sp->sign == ' ') sign[0] = ' ';
  int len = (int)(strlen(sign) + strlen(prefix) + strlen(body));
  int fillk = sp->width > len ? sp->width - len : 0;
  char align = sp->align ? sp->align : (numeric ? '>' : '<');
  int left = align == '>' ? fillk : align == '^' ? fillk / 2 : 0;
  int right = align == '<' ? fillk : align == '^' ? fillk - fillk / 2 : 0;
  char *o = out;
  if (align == '=') { o += sprintf(o, "%s%s", sign, prefix); for (int i = 0; i < fillk; i++) *o++ = sp->fill; o += sprintf(o, "%s", body); }
  else {
    for (int i = 0; i < left; i++) *o++ = sp->fill;
    o += sprintf(o, "%s%s%s", sign, prefix, body);
    for (int i = 0; i < right; i++) *o++ = sp->fill;
  }
  *o = 0;
}

static void spec_float(double x, int f32, const sprue_spec *sp, char *out) {
  char body[400], fmt[16];
  int neg = signbit(x) && !isnan(x);
  double a = fabs(x);
  char t = sp->type;
  if (!t && sp->precision < 0) {
    scalar_float(a, f32, body);
  } else if (!t) {   /* like 'g', but a fixed-point result keeps a digit after its point, and
                        exponents start a digit earlier (CPython's format_float_short) */
    int p = sp->precision ? sp->precision : 1;
    snprintf(body, sizeof body, sp->alt ? "%#.*e" : "%.*e", p - 1, a);
    char *ex = strchr(body, 'e');   /* (none in "inf", "nan") */
    int decpt = ex ? atoi(ex + 1) + 1 : 0;
    if (isfinite(a) && (decpt <= -4 || decpt > p - 1)) {
      char *e = strchr(body, 'e'), *m = e;
      if (!sp->alt && strchr(body, '.')) {
        while (m[-1] == '0') m--;
        if (m[-1] == '.') m--;
        memmove(m, e, strlen(e) + 1);
      }
    } else {
      snprintf(body, sizeof body, sp->alt ? "%#.*g" : "%.*g", p, a);
      if (isfinite(a) && !strpbrk(body, ".e")) strcat(body, ".0");
    }
  } else {
    int p = sp->precision < 0 ? 6 : sp->precision;
    char c = t == '%' ? 'f' : t;
    snprintf(fmt, sizeof fmt, "%%%s.*%c", sp->alt ? "#" : "", c);
    snprintf(body, sizeof body - 1, fmt, p, t == '%' ? a * 100 : a);
    if (t == '%') strcat(body, "%");
  }
  pad(sp, neg, "", body, out, 1);
}

static void spec_int(uint64_t mag, int neg, const sprue_spec *sp, char *out) {
  char body[80], rev[80];
  int base = sp->type == 'x' || sp->type == 'X' ? 16 : sp->type == 'o' ? 8 : sp->type == 'b' ? 2 : 10;
  const char *dig = sp->type == 'X' ? "0123456789ABCDEF" : "0123456789abcdef";
  int n = 0;
  do { rev[n++] = dig[mag % base]; mag /= base; } while (mag);
  for (int i = 0; i < n; i++) body[i] = rev[n - 1 - i];
  body[n] = 0;
  const char *prefix = !sp->alt ? "" : base == 16 ? (sp->type == 'X' ? "0X" : "0x") : base == 8 ? "0o" : base == 2 ? "0b" : "";
  pad(sp, neg, prefix, body, out, 1);
}

/* one scalar as Python formats numpy's 0-d array (its item(): a float32 is read as the double it
   is), with a spec (n > 0) or as its str */
static void format_scalar(int kind, const void *p, const char *spec, size_t n, char *out) {
  sprue_spec sp;
  if (!n || !parse_spec(spec, n, &sp)) sp.type = 0, sp.width = 0, sp.precision = -1, n = 0;
  if (kind == K_F64 || kind == K_F32) {
    double x = kind == K_F64 ? *(const double *)p : *(const float *)p;
    if (n) spec_float(x, 0, &sp, out);
    else scalar_float(x, 0, out);
    return;
  }
  if (kind == K_BOOL && !n) { strcpy(out, *(const int8_t *)p ? "True" : "False"); return; }
  int64_t v = kind == K_BOOL ? (*(const int8_t *)p != 0) : *(const int64_t *)p;
  int neg = kind != K_U64 && v < 0;
  uint64_t mag = kind == K_U64 ? (uint64_t)v : neg ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  if (n && sp.type && strchr("eEfFgG%", sp.type)) spec_float(kind == K_U64 ? (double)mag : (double)v, 0, &sp, out);
  else if (n) spec_int(mag, neg, &sp, out);
  else if (kind == K_U64) sprintf(out, "%llu", (unsigned long long)mag);
  else sprintf(out, "%lld", (long long)v);
}

/* -- arrays, as numpy's array2string ----------------------------------------------------------- */
enum { EDGE = 3, THRESHOLD = 1000, LINEWIDTH = 75 };

typedef struct {
  int kind, rank, summarize;
  const char *base;            /* the first element */
  size_t elem;                 /* its size in bytes */
  const int64_t *sizes, *strides;
  /* the column format, from the elements shown */
  int exp_format, pad_left, pad_right, precision, exp_size, width;
  /* what the scan of the elements shown found */
  double max, min;
  int any_finite, any_nonzero, nonfinite, neginf;
} sprue_array;

static double as_double(const sprue_array *a, const char *p) {
  return a->kind == K_F64 ? *(const double *)p : (double)*(const float *)p;
}

/* calls f on every element shown (all, or the first and last EDGE of each axis when summarized) */
static void each_shown(sprue_array *a, int axis, const char *p, void (*f)(sprue_array *, const char *)) {
  if (axis == a->rank) { f(a, p); return; }
  int64_t n = a->sizes[axis];
  for (int64_t i = 0; i < n; i++) {
    if (a->summarize && n > 2 * EDGE && i == EDGE) i = n - EDGE;
    each_shown(a, axis + 1, p + i * a->strides[axis] * (int64_t)a->elem, f);
  }
}

static void scan_range(sprue_array *a, const char *p) {
  double x = as_double(a, p);
  if (!isfinite(x)) { a->nonfinite = 1; if (isinf(x) && x < 0) a->neginf = 1; return; }
  a->any_finite = 1;
  double m = fabs(x);
  if (m != 0) {
    if (!a->any_nonzero || m > a->max) a->max = m;
    if (!a->any_nonzero || m < a->min) a->min = m;
    a->any_nonzero = 1;
  }
}

static void scan_widths(sprue_array *a, const char *p) {
  double x = as_double(a, p);
  if (!isfinite(x)) return;
  char s[96];
  if (a->exp_format) {
    scientific(x, a->kind == K_F32, 8, 0, 2, s);
    char *dot = strchr(s, '.'), *e = strchr(s, 'e');
    int left = (int)(dot - s), frac = (int)(e - dot - 1), exp = (int)strlen(e + 1) - 1;
    if (left > a->pad_left) a->pad_left = left;
    if (frac > a->precision) a->precision = frac;
    if (exp > a->exp_size) a->exp_size = exp;
  } else {
    positional(x, a->kind == K_F32, 8, s);
    char *dot = strchr(s, '.');
    int left = (int)(dot - s), right = (int)strlen(dot + 1);
    if (left > a->pad_left) a->pad_left = left;
    if (right > a->pad_right) a->pad_right = right;
  }
}

static void scan_int(sprue_array *a, const char *p) {
  char s[32];
  if (a->kind == K_U64) sprintf(s, "%llu", (unsigned long long)*(const uint64_t *)p);
  else sprintf(s, "%lld", (long long)*(const int64_t *)p);
  int w = (int)strlen(s);
  if (w > a->width) a->width = w;
}

static void plan(sprue_array *a) {
  a->exp_format = a->pad_left = a->pad_right = a->precision = a->width = 0;
  a->exp_size = -1;
  if (a->kind == K_BOOL) return;
  if (a->kind == K_I64 || a->kind == K_U64) { each_shown(a, 0, a->base, scan_int); return; }
  a->any_finite = a->any_nonzero = a->nonfinite = a->neginf = 0;
  a->max = a->min = 0;
  each_shown(a, 0, a->base, scan_range);
  if (a->any_nonzero && (a->max >= 1e8 || a->min < 1e-4 || a->max / a->min > 1e3)) a->exp_format = 1;
  if (a->any_finite) each_shown(a, 0, a->base, scan_widths);
  if (a->exp_format) a->pad_right = a->exp_size + 2 + a->precision;
  if (a->nonfinite) {
    int offset = a->pad_right + 1;
    if (3 - offset > a->pad_left) a->pad_left = 3 - offset;
    if (3 + a->neginf - offset > a->pad_left) a->pad_left = 3 + a->neginf - offset;
  }
}

static void element(const sprue_array *a, const char *p, char *out) {
  char s[96];
  if (a->kind == K_BOOL) { strcpy(out, *(const int8_t *)p ? " True" : "False"); return; }
  if (a->kind == K_I64 || a->kind == K_U64) {
    if (a->kind == K_U64) sprintf(s, "%llu", (unsigned long long)*(const uint64_t *)p);
    else sprintf(s, "%lld", (long long)*(const int64_t *)p);
    sprintf(out, "%*s", a->width, s);
    return;
  }
  double x = as_double(a, p);
  if (!isfinite(x)) {
    sprintf(out, "%*s", a->pad_left + a->pad_right + 1, isnan(x) ? "nan" : x < 0 ? "-inf" : "inf");
    return;
  }
  if (a->exp_format) {
    scientific(x, a->kind == K_F32, 8, a->precision, a->exp_size, s);
    int left = (int)(strchr(s, '.') - s);
    sprintf(out, "%*s%s", a->pad_left - left, "", s);
    return;
  }
  positional(x, a->kind == K_F32, 8, s);
  char *dot = strchr(s, '.');
  int left = (int)(dot - s), right = (int)strlen(dot + 1);
  sprintf(out, "%*s%s%*s", a->pad_left - left, "", s, a->pad_right - right, "");
}

/* numpy's _extendLine */
static void extend(sprue_str *s, sprue_str *line, const char *word, int64_t width, int64_t hanging) {
  int wrap = (int64_t)(line->n + strlen(word)) > width && (int64_t)line->n > hanging;
  if (wrap) {
    size_t k = line->n;
    while (k && line->p[k - 1] == ' ') k--;
    str_put(s, line->p, k);
    str_put(s, "\n", 1);
    line->n = 0;
    str_spaces(line, hanging);
  }
  str_cat(line, word);
}

/* numpy's _formatArray recurser: the text of the subarray at p, of axes axis.., into out */
static void recurse(const sprue_array *a, int axis, const char *p, int64_t hanging, int64_t width, sprue_str *out) {
  if (axis == a->rank) {
    char e[128];
    element(a, p, e);
    str_cat(out, e);
    return;
  }
  int64_t n = a->sizes[axis], step = a->strides[axis] * (int64_t)a->elem;
  int summary = a->summarize && 2 * EDGE < n;
  int64_t leading = summary ? EDGE : 0, trailing = summary ? EDGE : n;
  int left = a->rank - axis;
  sprue_str s = {0, 0, 0};
  str_put(&s, "", 0);
  if (left == 1) {
    int64_t elem_width = width - 1;
    sprue_str line = {0, 0, 0};
    str_spaces(&line, hanging);
    str_put(&line, "", 0);
    for (int64_t i = 0; i < leading; i++) {
      sprue_str w = {0, 0, 0};
      recurse(a, axis + 1, p + i * step, hanging + 1, width - 1, &w);
      extend(&s, &line, w.p ? w.p : "", elem_width, hanging);
      free(w.p);
      str_cat(&line, " ");
    }
    if (summary) { extend(&s, &line, "...", elem_width, hanging); str_cat(&line, " "); }
    for (int64_t i = trailing; i > 1; i--) {
      sprue_str w = {0, 0, 0};
      recurse(a, axis + 1, p + (n - i) * step, hanging + 1, width - 1, &w);
      extend(&s, &line, w.p ? w.p : "", elem_width, hanging);
      free(w.p);
      str_cat(&line, " ");
    }
    sprue_str w = {0, 0, 0};
    recurse(a, axis + 1, p + (n - 1) * step, hanging + 1, width - 1, &w);
    extend(&s, &line, w.p ? w.p : "", elem_width, hanging);
    free(w.p);
    str_put(&s, line.p, line.n);
    free(line.p);
  } else {
    for (int64_t i = 0; i < n; i++) {
      if (summary && i == leading) {
        str_spaces(&s, hanging);
        str_cat(&s, "...");
        for (int k = 1; k < left; k++) str_cat(&s, "\n");
        i = n - trailing;
      }
      sprue_str w = {0, 0, 0};
      recurse(a, axis + 1, p + i * step, hanging + 1, width - 1, &w);
      str_spaces(&s, hanging);
      str_put(&s, w.p ? w.p : "", w.n);
      free(w.p);
      if (i + 1 < n) for (int k = 1; k < left; k++) str_cat(&s, "\n");
    }
  }
  str_cat(out, "[");
  if (s.n > (size_t)hanging) str_put(out, s.p + hanging, s.n - hanging);
  str_cat(out, "]");
  free(s.p);
}

static void print_value(int kind, size_t elem, int rank, const sprue_ranked *d, const sprue_ranked *sd) {
  const char *spec_text = (const char *)sd->aligned + sd->offset;
  size_t spec_n = (size_t)sd->dims[0];
  const char *base = (const char *)d->aligned + d->offset * (int64_t)elem;
  if (rank == 0) {
    char out[512];
    format_scalar(kind, base, spec_text, spec_n, out);
    str_cat(&sprue_line, out);
    return;
  }
  sprue_array a;
  a.kind = kind; a.rank = rank; a.base = base; a.elem = elem;
  a.sizes = d->dims; a.strides = d->dims + rank;
  int64_t size = 1;
  for (int i = 0; i < rank; i++) size *= a.sizes[i];
  if (size == 0) { str_cat(&sprue_line, "[]"); return; }
  a.summarize = size > THRESHOLD;
  plan(&a);
  recurse(&a, 0, base, 1, LINEWIDTH, &sprue_line);
}

void _mlir_ciface_sprue_print_text(const sprue_ranked *t) {
  str_put(&sprue_line, (const char *)t->aligned + t->offset, (size_t)t->dims[0]);
}
/* _mlir_ciface_sprue_print_<kind>_<rank>(value, spec) for ranks 0 to 8 */
#define SPRUE_PRINT(name, kind, size, rank) \
  void _mlir_ciface_sprue_print_##name##_##rank(const sprue_ranked *x, const sprue_ranked *s) { \
    print_value(kind, size, rank, x, s); }
#define SPRUE_PRINT_RANKS(name, kind, size) \
  SPRUE_PRINT(name, kind, size, 0) SPRUE_PRINT(name, kind, size, 1) SPRUE_PRINT(name, kind, size, 2) \
  SPRUE_PRINT(name, kind, size, 3) SPRUE_PRINT(name, kind, size, 4) SPRUE_PRINT(name, kind, size, 5) \
  SPRUE_PRINT(name, kind, size, 6) SPRUE_PRINT(name, kind, size, 7) SPRUE_PRINT(name, kind, size, 8)
SPRUE_PRINT_RANKS(f64, K_F64, 8)
SPRUE_PRINT_RANKS(f32, K_F32, 4)
SPRUE_PRINT_RANKS(i64, K_I64, 8)
SPRUE_PRINT_RANKS(u64, K_U64, 8)
SPRUE_PRINT_RANKS(bool, K_BOOL, 1)
void _mlir_ciface_sprue_print_end(void) {
  str_put(&sprue_line, "\n", 1);
  if (sprue_line.p) fwrite(sprue_line.p, 1, sprue_line.n, stdout);
  fflush(stdout);
  sprue_line.n = 0;
}
"""


def print_source(directory: Path, name: str) -> Path:
    """Writes the print routines' C source for kernel `name` into directory; its path."""
    path = directory / f"{name}.{PRINT_SOURCE}"
    path.write_text(PRINT_C)
    return path


__all__ = ["PRINT_C", "PRINT_SOURCE", "PRINT_SYMBOL_PREFIX", "print_source"]
