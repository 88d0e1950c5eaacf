"""TEMPORARY (replaced at merge by the l1 branch's module)."""
import numpy as np


def _f(a):
    return np.asarray(a, np.float64)


def l2_distance(a, b):
    return np.sqrt(((_f(a) - _f(b)) ** 2).sum(axis=-1))


def inner_product(a, b):
    return (_f(a) * _f(b)).sum(axis=-1)


def cosine_distance(a, b):
    a, b = _f(a), _f(b)
    with np.errstate(invalid="ignore", divide="ignore"):
        return 1 - (a * b).sum(-1) / np.sqrt((a * a).sum(-1) * (b * b).sum(-1))


def l1_distance(a, b):
    return np.abs(_f(a) - _f(b)).sum(axis=-1)


def vector_dims(a):
    return np.full(len(a), a.shape[1], np.int64)


def vector_norm(a):
    return np.sqrt((_f(a) ** 2).sum(-1))


def l2_normalize(a):
    n = vector_norm(a)[:, None]
    return np.where(n > 0, _f(a) / np.where(n > 0, n, 1), 0).astype(np.float32)


def subvector(a, start, count):
    return np.ascontiguousarray(a[:, start - 1:start - 1 + count])
