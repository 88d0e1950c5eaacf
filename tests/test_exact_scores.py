"""The exact float64 scores (kernels/distance.exact_row_distances, which the scan's
and the walk's answers report) are sums in one fixed order, bit for bit: four
interleaved partial sums (column j in the (j mod 4)-th), the columns past the
last four in the first, then (a0 + a1) + (a2 + a3). The vectorised sum must
keep that order, or a row would score differently on two paths.
"""
from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings, strategies as st

from varvedb.kernels.distance import METRIC_CODES, exact_row_distances


def _ordered(x: np.ndarray, q: np.ndarray, metric: str) -> float:
    """The score of row x as plain Python floats add it up, in the documented order."""
    terms = {"l2": lambda a, b: (a - b) * (a - b), "l1": lambda a, b: abs(a - b),
             "dot": lambda a, b: a * b, "cosine": lambda a, b: a * b}[metric]
    lanes = [0.0] * 4
    main = len(q) - len(q) % 4
    for j in range(len(q)):
        lanes[j % 4 if j < main else 0] += terms(float(x[j]), float(q[j]))
    s = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3])
    if metric == "l2":
        return math.sqrt(s)
    if metric == "dot":
        return -s
    if metric == "l1":
        return s
    xx = sum(float(v) * float(v) for v in x)    # in column order
    qq = sum(float(v) * float(v) for v in q)
    if xx == 0.0 or qq == 0.0:
        return 1.0
    return 1.0 - min(1.0, max(-1.0, s / (math.sqrt(xx) * math.sqrt(qq))))


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), dim=st.integers(1, 70),
       kind=st.sampled_from(["f32", "f16", "int8"]),
       metric=st.sampled_from(["l2", "l1", "dot", "cosine"]))
def test_exact_scores_are_the_sums_in_their_fixed_order(seed, dim, kind, metric):
    rng = np.random.default_rng(seed)
    dtype = {"f32": np.float32, "f16": np.float16, "int8": np.int8}[kind]
    x = (rng.standard_normal((6, dim)) * (20 if kind == "int8" else rng.choice([1e-3, 1, 1e3]))
         ).astype(dtype)
    q = (rng.standard_normal(dim) * rng.choice([1e-3, 1, 1e3])).astype(np.float32)
    arena = np.ascontiguousarray(x.view(np.uint16) if kind == "f16" else x)
    rows = rng.integers(0, len(x), 5)
    out = np.empty(len(rows))
    exact_row_distances(arena, rows, q, METRIC_CODES[metric], out)
    want = [_ordered(x[r].astype(np.float64), q.astype(np.float64), metric) for r in rows]
    assert out.tolist() == want
