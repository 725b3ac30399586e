"""A direct-loop numpy convolution (XLA's semantics, written from its operation-semantics text, not
from sprue's code): every output element is a sum over its window, an input position read only when
it lands on a real (undilated, unpadded) element of the lhs."""
from __future__ import annotations

import itertools

import numpy as np


def conv_loops(lhs, rhs, strides, padding, lhs_dilation, rhs_dilation, specs, feature_group_count=1,
               batch_group_count=1):
    """specs: (lhs_spec, rhs_spec, out_spec), each (batch-or-out-feature, feature-or-in-feature,
    spatial...) axis numbers; padding: (low, high) pairs."""
    ls, rs, os_ = specs
    x, w = np.transpose(lhs, ls).astype(np.float64), np.transpose(rhs, rs).astype(np.float64)
    n, c = x.shape[:2]
    o, i = w.shape[:2]
    nsp = x.ndim - 2
    fg, bg = feature_group_count, batch_group_count
    out_sp = []
    for k in range(nsp):
        size = (x.shape[k + 2] - 1) * lhs_dilation[k] + 1 + padding[k][0] + padding[k][1]
        window = (w.shape[k + 2] - 1) * rhs_dilation[k] + 1
        out_sp.append(max((size - window) // strides[k] + 1, 0))
    out = np.zeros((n // bg, o, *out_sp))
    per_group = o // (fg * bg)
    for b in range(n // bg):
        for f in range(o):
            grp = f // per_group
            batch = grp * (n // bg) + b if bg > 1 else b
            for pos in itertools.product(*map(range, out_sp)):
                acc = 0.0
                for ci in range(i):
                    channel = grp * i + ci if fg > 1 else ci
                    for tap in itertools.product(*map(range, w.shape[2:])):
                        src = []
                        for k in range(nsp):
                            p = pos[k] * strides[k] + tap[k] * rhs_dilation[k] - padding[k][0]
                            if p < 0 or p % lhs_dilation[k] or p // lhs_dilation[k] >= x.shape[k + 2]:
                                break
                            src.append(p // lhs_dilation[k])
                        else:
                            acc += x[(batch, channel, *src)] * w[(f, ci, *tap)]
                out[(b, f, *pos)] = acc
    return np.transpose(out, np.argsort(os_))
