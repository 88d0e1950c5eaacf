"""`varvedb import` / `varvedb export`: a collection from and to a file, through the
public API only (Collection.insert of a table, insert_arrays, find).

Formats, by the file's suffix:
- .jsonl: one JSON object a line (a vector a list of numbers; read in chunks, each
  inserted as a list of rows);
- .csv: a header, then rows (needs pyarrow: its reader types the columns, an
  existing collection's as its fields; a vector in pgvector's text form
  "[1,2.5,3]", named with --vector, each row as many numbers); an empty field is
  null and a quoted "" an empty string, nothing else (NA, null, nan are texts),
  floats' non-finite NaN, Infinity, -Infinity (export writes them so), and a json
  field of the collection is read as JSON text;
- .parquet: Arrow's columns (needs pyarrow; read CHUNK rows at a time, each inserted
  as a table: a list or fixed-size-list column is the vector block; a file with
  fixed-size-list columns of floats, the usual vectors, is inserted as tables of
  up to BULK_BYTES, those columns copied batch by batch (of READ_BYTES) into one
  block each; a file of one such table and several row groups by two threads,
  a half of the row groups each);
- .npy (import only): a 2-D array, the vectors of one field (--vector, default
  "embedding"), ids assigned; read memory-mapped, inserted in slices of up to
  BULK_BYTES, each written from the mapping itself.

Why vectors are committed BULK_BYTES at a time, not CHUNK rows: a vector
field's rows then lie in the log as one run, which the checkpoint at close
refers to; in many runs, it writes (and hashes) the whole arena a second time
(engine/checkpoint.py, CONSOLIDATE_BYTES).

A missing collection is created from the data's types: the first chunk's (Arrow's
schema for csv/parquet, the values of the first rows for jsonl), in the commit of
that chunk's rows, so a refused first chunk leaves no collection behind; an "id"
column of strings makes text ids. A file with two columns of one name is refused.
Export writes id and every field (vectors too; json fields as Arrow's json type in
.parquet; bytes fields as Arrow's binary in .parquet, and as bytea's hex text
`\\x0102` marked as bytes in .jsonl and .csv: a `{"$bytea": "\\x0102"}` object in
.jsonl, the column named `name::bytea` in .csv's header) in the schema's order,
as of a version (`as_of`) and filtered (`where`). An import reads the marks back
as bytes (a collection it makes has bytes fields there; a bytes field of an
existing one also takes the hex text unmarked, as exports before the marks
wrote it), so a round trip gives back the bytes, into a new collection too.
A json value that would read as a mark — a one-key object `{"$bytea": ...}`, or
`{"$json": v}` around such a one (`_escaped`) — is written escaped, inside
`{"$json": ...}`, and read back unescaped: a json value and a bytes value never
share a form. (Exports before the escape wrote such json values as they were: an
existing collection's json field keeps a `{"$bytea": ...}` as JSON, a new
collection takes it for bytes.)
"""
from __future__ import annotations

import json
import os
import re
import sys
import tokenize
from typing import Iterator

import numpy as np

from .errors import (DimensionError, FieldTypeError, OptionError, SqlError, StorageError,
                     VarveError)
from .bytea import bytea_text, parse_bytea
from .schema_inference import infer_schema
from .tabular import frame_columns, json_values, to_arrow, unique_names

CHUNK = 100_000          # rows a write of .jsonl or .csv (one commit each)
BULK_BYTES = 1 << 30     # the most a write of .parquet or .npy holds (one commit each)
READ_BYTES = 1 << 20     # vector bytes a .parquet batch decodes: it is copied while in cache
CSV_BLOCK = 64 << 20     # bytes Arrow's csv reader reads at a time
IMPORTS = (".jsonl", ".csv", ".parquet", ".npy")
EXPORTS = (".jsonl", ".csv", ".parquet")
_CSV_QUOTE = re.compile(r'[",\r\n]')     # a field with one of these is quoted


def import_file(db, name: str, path: str, vector: str | None = None, dim: int | None = None,
                progress: bool | None = None) -> int:
    """Insert the rows of `path` into collection `name` of `db` (created from the
    data's types when missing); returns the rows inserted. A file that cannot be
    read raises a VarveError (StorageError, FieldTypeError); the chunks before it
    stay inserted, each its own commit (a collection made for the import exists
    only with its first chunk)."""
    with _typed_errors(path):
        return _import(db, name, path, vector, dim, progress)


def _import(db, name, path, vector, dim, progress) -> int:
    suffix = _suffix(path, IMPORTS, "import")
    if dim is not None and vector is None:
        raise OptionError("--dim goes with --vector (the vector column it sizes)")
    coll = db.collection(name) if name in db.collections() else None
    if suffix == ".csv":     # a collection's fields are read as its types
        kinds = {} if coll is None else {"id": coll.schema.id_kind,     # text ids: "007"
                                          **{n: f.kind for n, f in coll.schema.fields.items()}}
        chunks = _csv_chunks(path, vector, dim, kinds)
    else:
        chunks = {".jsonl": _jsonl_chunks, ".parquet": _parquet_chunks,
                  ".npy": _npy_chunks}[suffix](path, vector, dim)
    total = next(chunks)
    bar = _bar(total, progress, f"import {os.path.basename(path)}")
    done = 0
    try:
        for chunk in chunks:
            if suffix == ".jsonl":      # (before a collection is made of its types)
                chunk = _bytes_from_text(coll, chunk)
            if coll is None:     # made and filled in one commit (or the caller's open
                # transaction): a first chunk refused leaves no empty collection behind
                with db.thread_session().writing():
                    coll = _create(db, name, chunk, vector, dim)
                    n = _insert(coll, chunk, suffix)
            else:
                n = _insert(coll, chunk, suffix)
            done += n
            bar.update(n)
    finally:
        bar.close()
    if coll is None:
        raise FieldTypeError(f"{path} holds no rows: nothing to make collection {name!r} of")
    return done


def export_file(db, name: str, path: str, as_of=None, where: str | None = None,
                params: list | tuple = ()) -> int:
    """Write collection `name`'s documents (as of a version, filtered) to `path`;
    returns the rows written."""
    with _typed_errors(path):
        return _export(db, name, path, as_of, where, params)


def _export(db, name, path, as_of, where, params) -> int:
    suffix = _suffix(path, EXPORTS, "export")
    coll = db.collection(name)
    fields = list(coll.schema.fields)
    hits = coll.find(where, params, as_of=as_of, select=fields)
    kinds = {n: f.kind for n, f in coll.schema.fields.items()}
    if suffix == ".parquet":
        import pyarrow.parquet as pq
        pq.write_table(to_arrow(["id", *fields],
                                [hits.ids, *([h.fields[n] for h in hits] for n in fields)],
                                json=frozenset(n for n in fields if kinds[n] == "json")), path)
    elif suffix == ".jsonl":
        with open(path, "w", encoding="utf-8") as f:
            for h in hits:      # (a bytes value marked: {"$bytea": its hex text};
                # a json value that reads as one escaped: {"$json": the value})
                f.write(json.dumps({"id": h.id, **{n: _json_value(h.fields[n], kinds[n])
                                                   for n in fields}},
                                   ensure_ascii=False) + "\n")
    else:
        from .query.literals import vector_text
        with open(path, "w", encoding="utf-8", newline="") as f:
            # a bytes column's header marks it (name::bytea), as a csv's cells cannot
            f.write(_csv_line(["id", *(n + BYTEA_MARK if kinds[n] == "bytes" else n
                                       for n in fields)]))
            for h in hits:
                f.write(_csv_line([str(h.id), *(_csv_value(h.fields[n], kinds[n], vector_text)
                                                for n in fields)]))
    return len(hits)


# ---- reading: each reader yields its row count (or None), then chunks -------------

def _jsonl_chunks(path: str, vector, dim) -> Iterator:
    yield None
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise FieldTypeError(f"{path} line {i}: not JSON ({e.msg})") from None
            except RecursionError:
                raise FieldTypeError(f"{path} line {i}: JSON nested too deeply") from None
            if not isinstance(row, dict):
                raise FieldTypeError(f"{path} line {i}: a JSON object a line, got "
                                     f"{type(row).__name__}")
            rows.append(row)
            if len(rows) == CHUNK:
                yield rows
                rows = []
    if rows:
        yield rows


def _csv_chunks(path: str, vector, dim, kinds: dict) -> Iterator:
    pa, pcsv = _pyarrow("csv")
    # what export writes reads back as it was: a collection's text "123" or "nan"
    # stays text (its fields' types, not Arrow's guesses), only an empty field is
    # null (not NA, null, nan...), a quoted empty one "" an empty string
    types = {n: _CSV_TYPES[k](pa) for n, k in kinds.items() if k in _CSV_TYPES}
    types.update((n, pa.string()) for n in _csv_header(path) if n.endswith(BYTEA_MARK))
    if vector:
        types[vector] = pa.string()
    opts = pcsv.ConvertOptions(column_types=types, null_values=[""],
                               strings_can_be_null=True, quoted_strings_can_be_null=False)
    yield None
    # a quoted newline (export writes texts as they are) may straddle a block
    reader = pcsv.open_csv(path, convert_options=opts,
                           parse_options=pcsv.ParseOptions(newlines_in_values=True),
                           read_options=pcsv.ReadOptions(block_size=CSV_BLOCK))
    row = 0
    for batch in reader:
        batch = _marked_bytes(pa, batch)
        if row == 0:
            unique_names(batch.schema.names)
        if vector is not None:
            if vector not in batch.schema.names:
                raise FieldTypeError(f"--vector {vector!r}: {path} has no such column "
                                     f"(it has {batch.schema.names})")
            batch = _vectors_from_text(pa, batch, vector, dim, row)
        row += batch.num_rows
        if batch.num_rows:
            yield batch


def _csv_header(path: str) -> list:
    """The names of a csv's header (its first record)."""
    import csv
    with open(path, encoding="utf-8", newline="") as f:
        return next(csv.reader(f), [])


_CSV_TYPES = {"text": lambda pa: pa.string(), "json": lambda pa: pa.string(),
              "bytes": lambda pa: pa.string(),
              "int": lambda pa: pa.int64(), "float": lambda pa: pa.float64(),
              "bool": lambda pa: pa.bool_()}


def _json_from_text(coll, batch):
    """A csv's text in the collection's json and bytes fields, decoded (export writes
    each as JSON text, or as bytea's hex text; a csv cannot say which columns are
    json or bytes, the collection can)."""
    import pyarrow as pa
    names = [n for n, f in coll.schema.fields.items()
             if f.kind in ("json", "bytes") and n in batch.schema.names
             and pa.types.is_string(batch.schema.field(n).type)]
    if not names:
        return batch
    columns = frame_columns(batch)                  # insert_arrays' columns
    for n in names:
        columns[n] = json_values(n, columns[n]) if coll.schema.fields[n].kind == "json" \
            else _bytes_of(n, columns[n])
    return columns


def _bytes_from_text(coll, rows: list) -> list:
    """jsonl rows with their bytes decoded: each `{"$bytea": "\\x0102"}` (export's mark)
    but in a json field of `coll`, and a bytes field's hex text unmarked (an export
    of before the mark); and each escaped json value (`{"$json": v}`, v `_escaped`)
    as v. `coll`: None where the import makes the collection."""
    fields = {} if coll is None else coll.schema.fields
    texts = [n for n, f in fields.items() if f.kind == "bytes"]
    for r in rows:
        for n, v in r.items():
            if type(v) is not dict or len(v) != 1:
                continue
            if JSON_KEY in v and _escaped(v[JSON_KEY]):
                r[n] = v[JSON_KEY]
            elif BYTES_KEY in v and (n not in fields or fields[n].kind != "json"):
                got = v[BYTES_KEY]
                if not isinstance(got, str):
                    raise FieldTypeError(f"field {n!r}: a {{{BYTES_KEY!r}: ...}} value holds "
                                         f"bytea's hex text, got {type(got).__name__}")
                r[n] = _bytes_of(n, [got])[0]
        for n in texts:
            if isinstance(r.get(n), str):
                r[n] = _bytes_of(n, [r[n]])[0]
    return rows


BYTES_KEY = "$bytea"        # .jsonl: a bytes value is {"$bytea": "\\x0102"}
JSON_KEY = "$json"          # .jsonl: a json value v that is _escaped is {"$json": v}
BYTEA_MARK = "::bytea"      # .csv: a bytes column's header is name::bytea


def _escaped(v) -> bool:
    """Whether json value `v` is written escaped in .jsonl, as {"$json": v}: a one-key
    object that reads as a mark, {"$bytea": ...} or {"$json": w} with w _escaped
    (so {"$json": 1}, which is no mark, stays as it is, as exports before the
    escape wrote it)."""
    while type(v) is dict and len(v) == 1:
        if BYTES_KEY in v:
            return True
        if JSON_KEY not in v:
            return False
        v = v[JSON_KEY]
    return False


def _marked_bytes(pa, batch):
    """A csv batch with each `name::bytea` column (export's bytes column) decoded
    from bytea's hex text to Arrow's binary, named `name`."""
    names = batch.schema.names
    if not any(n.endswith(BYTEA_MARK) for n in names):
        return batch
    columns, out = [], []
    for n, col in zip(names, batch.columns):
        if n.endswith(BYTEA_MARK):
            n = n[:-len(BYTEA_MARK)]
            col = pa.array(_bytes_of(n, col.to_pylist()), pa.binary())
        columns.append(col)
        out.append(n)
    return pa.RecordBatch.from_arrays(columns, names=out)


def _bytes_of(name: str, texts) -> list:
    """bytea's text forms as bytes (None stays); FieldTypeError naming the field."""
    try:
        return [None if t is None else parse_bytea(t) for t in texts]
    except SqlError as e:
        raise FieldTypeError(f"field {name!r}: {e}") from None


def _vectors_from_text(pa, batch, name: str, dim, first_row: int):
    """A csv's vector column in pgvector's text form ("[1,2.5,3]") as a list column:
    each row one bracketed list of `dim` numbers (else the first row's count)."""
    import pyarrow.compute as pc
    col = batch.column(name)
    nulls = col.is_null().to_numpy(zero_copy_only=False)
    texts = pc.utf8_trim_whitespace(col.drop_null())          # a null vector: no text
    parts = pc.split_pattern(pc.utf8_trim(texts, "[]"), ",")
    counts = pc.list_value_length(parts).to_numpy(zero_copy_only=False)
    width = dim if dim is not None else (int(counts[0]) if len(counts) else 1)
    listed = pc.match_substring_regex(texts, r"^\[[^\[\]]*\]$").to_numpy(zero_copy_only=False)
    bad = np.flatnonzero(~listed | (counts != width))
    if len(bad):                 # named by its row: the header aside, from 1
        i = int(bad[0])
        row = first_row + int(np.flatnonzero(~nulls)[i]) + 1
        if not listed[i]:
            raise FieldTypeError(f"column {name!r} row {row}: a vector is written "
                                 f"[1,2.5,3], got {texts[i].as_py()[:40]!r}")
        raise DimensionError(f"column {name!r} row {row}: {int(counts[i])} numbers, not "
                             f"{width} (" + ("--dim" if dim is not None else "the first row's")
                             + ")")
    try:
        flat = pc.utf8_trim_whitespace(pc.list_flatten(parts)).cast(pa.float32())
    except pa.ArrowInvalid as e:
        raise FieldTypeError(f"column {name!r}: vectors are lists of numbers ({e})") from None
    flat = flat.to_numpy(zero_copy_only=False)
    if nulls.any():              # the nulls' slots hold zeros, masked
        full = np.zeros((len(nulls), width), np.float32)
        full[~nulls] = flat.reshape(-1, width)
        flat = full.reshape(-1)
    col = pa.FixedSizeListArray.from_arrays(pa.array(flat), width, mask=pa.array(nulls))
    i = batch.schema.get_field_index(name)
    return batch.set_column(i, name, col) if hasattr(batch, "set_column") else \
        pa.RecordBatch.from_arrays([col if j == i else batch.column(j)
                                    for j in range(batch.num_columns)],
                                   names=batch.schema.names)


def _parquet_chunks(path: str, vector, dim) -> Iterator:
    pa, pq = _pyarrow("parquet")
    f = pq.ParquetFile(path)
    schema = f.schema_arrow
    unique_names(schema.names)
    if vector is not None and vector not in schema.names:
        raise FieldTypeError(f"--vector {vector!r}: {path} has no such column "
                             f"(it has {schema.names})")
    left = f.metadata.num_rows
    yield left
    # fixed-size lists of floats (vectors) are copied batch by batch into one block
    # a chunk, each batch's decoded copy let go at once (Arrow's allocator reuses
    # it); without such a column a batch is a chunk
    lists = [i for i, fl in enumerate(schema)
             if pa.types.is_fixed_size_list(fl.type) and pa.types.is_floating(fl.type.value_type)]
    row_bytes = sum(schema[i].type.list_size * schema[i].type.value_type.bit_width // 8
                    for i in lists)
    per_chunk = max(CHUNK, BULK_BYTES // max(1, row_bytes))
    # small batches: each decoded into memory the reader reuses, still in cache when
    # copied (a batch of CHUNK rows is 50 MB of fresh pages at 128 floats, and cold)
    step = min(CHUNK, max(1, READ_BYTES // row_bytes)) if lists else CHUNK
    groups = [f.metadata.row_group(g).num_rows for g in range(f.num_row_groups)]
    if lists and len(groups) > 1 and 0 < left == sum(groups) <= per_chunk:
        yield parquet_halves(pa, pq, path, schema, lists, groups, step)
        return
    rest, blocks, at = [], None, 0
    for batch in f.iter_batches(batch_size=step):
        while batch.num_rows:
            if blocks is None:    # a file whose metadata undercounts: chunks of CHUNK
                rows = min(left, per_chunk) if left > 0 else CHUNK
                blocks = [_VectorBlock(schema[i].type, rows) for i in lists]
            take = blocks[0].rows - at if lists else batch.num_rows
            part, batch = batch.slice(0, take), batch.slice(take)
            rest.append(_take(part, schema, lists, blocks, at))
            at += part.num_rows
            if not lists or at == blocks[0].rows:
                yield _parquet_table(pa, schema, lists, rest, blocks, at)
                left -= at
                rest, blocks, at = [], None, 0
    if rest:
        yield _parquet_table(pa, schema, lists, rest, blocks, at)


def parquet_halves(pa, pq, path: str, schema, lists, groups: list, step: int):
    """A file of one chunk and several row groups: its two halves of row groups read
    at once, by this thread and one more, each into its own rows of the blocks.
    Decoding is most of a parquet import's CPU, and Arrow's decoding and numpy's
    copies run without the GIL (each half's rows are those its row groups' metadata
    count: the reader yields exactly those)."""
    from concurrent.futures import ThreadPoolExecutor
    starts = np.cumsum([0, *groups]).tolist()
    n = starts[-1]
    blocks = [_VectorBlock(schema[i].type, n) for i in lists]
    half = min(max(1, int(np.searchsorted(starts, n / 2))), len(groups) - 1)

    def fill(first: int, last: int) -> list:
        rest, at = [], starts[first]
        for batch in pq.ParquetFile(path).iter_batches(
                batch_size=step, row_groups=list(range(first, last)), use_threads=False):
            rest.append(_take(batch, schema, lists, blocks, at))
            at += batch.num_rows
        return rest

    with ThreadPoolExecutor(1) as pool:
        second = pool.submit(fill, half, len(groups))
        rest = fill(0, half)
        rest += second.result()
    return _parquet_table(pa, schema, lists, rest, blocks, n)


def _take(part, schema, lists, blocks, at: int):
    """A batch's vector columns copied into the blocks at row `at`; its other columns."""
    for i, b in zip(lists, blocks):
        b.copy(part.column(i), at)
    return part.drop_columns([schema[i].name for i in lists])


class _VectorBlock:
    """One vector column of a chunk of rows: values and null mask, filled batch by batch."""

    def __init__(self, type_, rows: int):
        self.type, self.rows, self.width = type_, rows, type_.list_size
        self.values = np.empty((rows, self.width), type_.value_type.to_pandas_dtype())
        self.nulls = np.zeros(rows, bool)

    def copy(self, col, at: int) -> None:
        n = len(col)
        into = self.values[at:at + n]
        if col.null_count:       # a null's slot holds zeros, masked
            valid = col.is_valid().to_numpy(zero_copy_only=False)
            self.nulls[at:at + n] = ~valid
            into[~valid] = 0
            into[valid] = _flat(col.drop_null()).reshape(-1, self.width)
        else:
            into[:] = _flat(col).reshape(n, self.width)

    def array(self, pa, n: int):
        nulls = self.nulls[:n]
        return pa.FixedSizeListArray.from_arrays(pa.array(self.values[:n].reshape(-1)),
                                                 type=self.type,
                                                 mask=pa.array(nulls) if nulls.any() else None)


def _flat(col) -> np.ndarray:
    """A fixed-size-list array's values, flat: a view of Arrow's buffer."""
    return col.flatten().to_numpy(zero_copy_only=False)


def _parquet_table(pa, schema, lists, rest, blocks, n):
    """A chunk's table: the batches read, each vector column put back from its block."""
    table = pa.Table.from_batches(rest, schema=pa.schema(
        [fl for i, fl in enumerate(schema) if i not in lists]))
    for i, b in zip(lists, blocks or ()):      # in order: each lands at its own index
        table = table.add_column(i, schema[i], b.array(pa, n))
    return table


def _npy_chunks(path: str, vector, dim) -> Iterator:
    try:
        a = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, EOFError, SyntaxError, tokenize.TokenError) as e:
        # a short file, or a header that is not the dict numpy writes
        raise FieldTypeError(f"{path}: not a .npy array ({e})") from None
    if a.ndim != 2:
        raise FieldTypeError(f"{path}: a .npy import is a 2-D array (one vector a row), "
                             f"got shape {a.shape}")
    if dim is not None and a.shape[1] != dim:
        raise FieldTypeError(f"{path}: vectors of {a.shape[1]} numbers, --dim says {dim}")
    yield a.shape[0]
    step = max(1, BULK_BYTES // max(1, a.shape[1] * a.dtype.itemsize))
    for start in range(0, a.shape[0], step):
        yield {vector or "embedding": np.ascontiguousarray(a[start:start + step])}


# ---- the collection: made from the first chunk's types when missing ----------------

def _create(db, name: str, chunk, vector, dim):
    if isinstance(chunk, dict):                      # .npy: one vector block
        (col, block), = chunk.items()
        return db.create_collection(name, {col: f"vector({block.shape[1]})"})
    return db.create_collection(name, infer_schema(chunk, vector, dim))


def _insert(coll, chunk, suffix: str) -> int:
    if suffix == ".csv":
        chunk = _json_from_text(coll, chunk)
    if isinstance(chunk, dict):              # columns: .npy's block, a csv's decoded
        coll.insert_arrays(**chunk)
        return len(next(iter(chunk.values())))
    if isinstance(chunk, list):
        coll.insert(chunk)
        return len(chunk)
    if chunk.num_rows:       # an Arrow batch or table: column-wise, as insert() takes
        coll.insert_arrays(**frame_columns(chunk))    # it (but for its list of ids)
    return chunk.num_rows


# ---- writing -------------------------------------------------------------------------

def _json_value(v, kind: str):
    if v is None:
        return None
    if kind == "sparsevec":     # pgvector's text, which a write takes back
        return str(v)
    if kind == "bytes":         # bytea's text, marked as bytes: an import takes it back
        return {BYTES_KEY: bytea_text(v)}
    if kind == "json" and _escaped(v):      # not a mark: escaped, which an import undoes
        return {JSON_KEY: v}
    if isinstance(v, np.ndarray):
        return v.tolist()
    if kind == "timestamp":
        return v.isoformat()
    return v


def _csv_line(values: list) -> str:
    """One CSV record: a null is an empty field, an empty string a quoted one ("")
    — the distinction the reader keeps (strings_can_be_null, quoted ones not)."""
    return ",".join("" if v is None else
                    '"' + v.replace('"', '""') + '"' if v == "" or _CSV_QUOTE.search(v)
                    else v for v in values) + "\r\n"


def _csv_value(v, kind: str, vector_text) -> str | None:
    if v is None:
        return None
    if kind == "vector":
        return vector_text(v)
    if kind == "json":
        return json.dumps(v, ensure_ascii=False)
    if kind == "timestamp":
        return v.isoformat()
    if kind == "bytes":
        return bytea_text(v)
    if kind == "bool":
        return "true" if v else "false"
    if isinstance(v, float):     # PostgreSQL's words for the non-finite, which Arrow reads
        return repr(v) if np.isfinite(v) else _NON_FINITE[repr(v)]
    return str(v)


_NON_FINITE = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}


# ---- helpers -------------------------------------------------------------------------

class _typed_errors:
    """A file's own errors as VarveErrors: the OS's (StorageError), text that is
    not UTF-8 and Arrow's reading errors (FieldTypeError), each naming the file."""

    def __init__(self, path: str):
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, kind, e, tb):
        if e is None or isinstance(e, VarveError):
            return False
        if isinstance(e, OSError):
            raise StorageError(f"{self.path}: {e.strerror or e}", e) from None
        if isinstance(e, UnicodeDecodeError):
            raise FieldTypeError(f"{self.path}: not UTF-8 text ({e.reason})") from None
        if (type(e).__module__ or "").startswith("pyarrow"):
            raise FieldTypeError(f"{self.path}: {e}") from None
        return False


def _suffix(path: str, allowed: tuple, verb: str) -> str:
    suffix = os.path.splitext(path)[1].lower()
    if suffix not in allowed:
        raise OptionError(f"{verb} reads {', '.join(allowed)} files (by suffix); "
                          f"got {os.path.basename(path)!r}" if verb == "import" else
                          f"{verb} writes {', '.join(allowed)} files (by suffix); "
                          f"got {os.path.basename(path)!r}")
    return suffix


def _pyarrow(part: str):
    try:
        import pyarrow as pa
        import importlib
        return pa, importlib.import_module(f"pyarrow.{part}")
    except ImportError:
        raise OptionError(f"a .{part} file needs pyarrow (pip install pyarrow)") from None


def _bar(total, progress, what: str):
    from tqdm import tqdm
    if progress is None:
        progress = sys.stderr.isatty()
    return tqdm(total=total, disable=not progress, unit="rows", unit_scale=True, desc=what,
                file=sys.stderr)
