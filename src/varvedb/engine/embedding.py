"""Vectors filled from text on write: a vector field that names an embedder
(vv.Vector(dim, embed=..., source="body")) gets, in each new row version that
has the source text and no vector, the embedder's vector of that text.

Filled before the frame is written, like a default (schema.complete_columns):
the log holds the vector, so replay and readers never run the model, and an
embedder that fails or returns the wrong shape refuses the write with nothing
written. An update that sets the text and not the vector embeds it again (the
old vector would describe the old text); an upsert that merges does so only
for a text other than the stored one (unchanged_texts), and keeps the vector
of a text given as it was.

A transaction without the privilege of reading this machine's files (that of a
server's session) may not make a field whose embedder loads a model from them
(check_embedders, which every verb that makes a field calls).
"""
from __future__ import annotations

import numpy as np

from ..errors import SchemaError, SqlError
from ..schema import VECTOR_DTYPES, Schema, brief


def check_embedders(fields: dict, server_files: bool) -> None:
    """Refuse (42501), to a transaction without the privilege of reading this machine's
    files, a field whose embedder loads a model from them (its writes and embed() would)."""
    if server_files:
        return
    from ..embed import names_files
    for name, f in fields.items():
        if f.embed is not None and names_files(f.embed):
            raise SqlError("42501", f"permission denied to load an embedder from the "
                                    f"server's files: field {brief(name)} names "
                                    f"{brief(f.embed)}; a server's session may name 'onnx' "
                                    "or a registered embedder")


def fill_embedded(schema: Schema, columns: dict, n: int, stale=(), allow=None) -> dict:
    """`columns` of n new rows with each embedded vector filled where it is null
    (or absent, or named in `stale`) and its source text is not; `allow`: field
    -> the rows (a bool mask; None: all) whose vector may be filled (an upsert's
    merge: not a live document's that keeps its text)."""
    out = columns
    for name in schema.embedded:
        f = schema.fields[name]
        src = columns.get(f.source)
        rows = None if allow is None else allow.get(name)
        if src is None or not n or rows is not None and not rows.any():
            continue
        texts, tnulls = src
        if tnulls is None:
            tnulls = np.fromiter((t is None for t in texts), bool, len(texts))
        dtype = VECTOR_DTYPES[f.dtype]
        given = None if name in stale else columns.get(name)
        if given is None:
            vals, vnulls = np.zeros((n, f.dim), dtype), np.ones(n, bool)
        else:
            vals, vnulls = np.array(given[0], dtype), np.array(given[1], bool)
        todo = vnulls & ~np.asarray(tnulls, bool)
        todo = np.flatnonzero(todo if rows is None else todo & rows)
        if not len(todo):
            continue
        vals[todo] = _embed(f, name, [texts[i] for i in todo.tolist()]).astype(dtype)
        vnulls[todo] = False
        if out is columns:
            out = dict(columns)
        out[name] = (vals, vnulls)
    return out


def unchanged_texts(t, source: str, old: np.ndarray, rows: np.ndarray,
                    texts: tuple) -> np.ndarray:
    """A bool mask over an upsert's batch: the rows among `rows` (a mask) whose
    document is live (old[i] >= 0, its row in table `t`) and whose text `texts`
    (the batch's (values, nulls) of field `source`) is the live one's: their
    vectors need no embedding, the live ones still describe the text."""
    same = np.zeros(len(old), bool)
    idx = np.flatnonzero(rows & (old >= 0))
    if len(idx):
        vals = texts[0]
        kept, _ = t.columns[source].take(old[idx])
        same[idx] = [vals[i] == v for i, v in zip(idx.tolist(), kept)]
    return same


def _embed(f, name: str, texts: list) -> np.ndarray:
    from ..embed import embed_batched, resolve
    embedder = resolve(f.embed)
    got = np.asarray(embed_batched(embedder, texts), np.float32)  # a bar on a terminal
    if got.shape != (len(texts), f.dim) or not np.isfinite(got).all():
        raise SchemaError(f"embedder {f.embed!r} gave {got.shape} values for {len(texts)} "
                          f"texts of vector field {name!r} ({f.dim} dimensions, finite)")
    return got
