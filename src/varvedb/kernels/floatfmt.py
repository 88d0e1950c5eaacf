"""A float4 vector in pgvector's text form, `[1,2.5,0.001]`, in one pass.

Why a kernel: numpy's shortest digits (Dragon4, per element) cost most of a
wire query that returns a 128-d vector as text. Each element gets the fewest
decimal digits that read back as the same float4, the nearest such (as
PostgreSQL's float4out, a tie to the even digit), found exactly in float64: for the scale 10**s
(-6 <= s <= 12) the candidates are the two integers around x * 10**s, and one
reads back as x when it lies strictly inside x's rounding interval (on its
ends too when x's mantissa is even: reading rounds half to even). Each compare
is exact: an interval end has 25 significant bits, 5**12 has 28, so their
product and every candidate times 10**-s fit float64's 53.

PostgreSQL writes a float4 in fixed notation when its shortest decimal's
exponent is in [-4, 6); an element outside that (or zero's sign aside, any
non-finite one) is left to the caller: its place holds a NUL byte and its
index is listed.
"""
import math

import numpy as np

from .jit import njit

_JIT = dict(cache=True, nogil=True)

MAX_CHARS = 17          # bytes an element takes at most: -0.0001234567 and a comma
_POW10 = np.array([10.0 ** i for i in range(13)])


@njit(**_JIT)
def _shortest(ax, pow10):
    """(digits, s): the decimal digits * 10**-s that reads back as the positive
    float4 `ax` (as float64), or (-1, 0) where the exact range cannot say."""
    f, ex = math.frexp(ax)
    ulp = math.ldexp(1.0, ex - 24)
    lo = ax - (ulp / 2 if f == 0.5 else ulp)       # below a power of two: half the step
    m_lo = (ax + lo) / 2
    m_hi = ax + ulp / 2
    even = int(ax / ulp) % 2 == 0
    s = max(-6, -int(math.floor(math.log10(ax))) - 1)
    while s <= 12:
        if s >= 0:
            scale = pow10[s]
            xs, b_lo, b_hi = ax * scale, m_lo * scale, m_hi * scale
            c1 = math.floor(xs)
            c2 = c1 + 1.0
            v1, v2 = c1, c2
        else:
            scale = pow10[-s]
            xs, b_lo, b_hi = ax / scale, m_lo, m_hi
            c1 = math.floor(xs)
            c2 = c1 + 1.0
            v1, v2 = c1 * scale, c2 * scale
        ok1 = c1 >= 1.0 and (b_lo < v1 < b_hi or (even and (v1 == b_lo or v1 == b_hi)))
        ok2 = b_lo < v2 < b_hi or (even and (v2 == b_lo or v2 == b_hi))
        if ok1 and ok2:
            # both read back: the nearer (2x against their sum, exact), a tie
            # to the even one (as PostgreSQL's float4out)
            twice = 2.0 * (xs if s >= 0 else ax)
            mid = (c1 + c2) if s >= 0 else (v1 + v2)
            if twice == mid:
                return (int(c1) if int(c1) % 2 == 0 else int(c2)), s
            return (int(c1) if twice < mid else int(c2)), s
        if ok1:
            return int(c1), s
        if ok2:
            return int(c2), s
        s += 1
    return -1, 0


@njit(readonly=("v",), **_JIT)
def vector_text(v, out, left):
    """Write `v`'s text into `out` (MAX_CHARS * len(v) + 2 bytes); the indexes
    of the elements left to the caller into `left`. Returns (bytes, left)."""
    digits = np.empty(12, np.uint8)
    at = 0
    n_left = 0
    out[at] = 91                                  # [
    at += 1
    for i in range(v.shape[0]):
        if i:
            out[at] = 44                          # ,
            at += 1
        x = np.float64(v[i])
        if x == 0.0:
            if math.copysign(1.0, x) < 0:
                out[at] = 45
                at += 1
            out[at] = 48
            at += 1
            continue
        ax = abs(x)
        d, s = (-1, 0) if not (1e-5 <= ax < 1e7) else _shortest(ax, _POW10)
        nd = 0
        while d > 0:                              # digits, lowest first
            digits[nd] = 48 + d % 10
            d //= 10
            nd += 1
        e10 = nd - 1 - s
        if nd == 0 or e10 < -4 or e10 >= 6:
            out[at] = 0
            at += 1
            left[n_left] = i
            n_left += 1
            continue
        if x < 0:
            out[at] = 45
            at += 1
        if s <= 0:
            for j in range(nd - 1, -1, -1):
                out[at] = digits[j]
                at += 1
            for j in range(-s):
                out[at] = 48
                at += 1
        elif s < nd:
            for j in range(nd - 1, -1, -1):
                if j == s - 1:
                    out[at] = 46                  # .
                    at += 1
                out[at] = digits[j]
                at += 1
        else:
            out[at] = 48
            out[at + 1] = 46
            at += 2
            for j in range(s - nd):
                out[at] = 48
                at += 1
            for j in range(nd - 1, -1, -1):
                out[at] = digits[j]
                at += 1
    out[at] = 93                                  # ]
    return at + 1, n_left
