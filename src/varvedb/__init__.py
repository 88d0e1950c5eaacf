"""varvedb: an embedded, single-file, versioned document + vector database.

    import varvedb as vv
    db = vv.connect("notes.varve")          # or vv.Client("http://127.0.0.1:8080", token=...)
    docs = db.create_collection("docs", {"title": "text", "embedding": vv.Vector(384)})

Every public name loads on first use (`__getattr__` over `_EXPORTS`): `vv.Client`
loads the client and what it needs (no engine, no numba, no http.client until
it is named), `vv.connect` the engine.
"""
from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING

__version__ = "0.1.0"

# Logging under "varvedb.*" (varvedb.engine, varvedb.index, varvedb.server, ...) is
# quiet until the program configures logging: a library's records never reach
# Python's last-resort stderr handler on their own.
logging.getLogger("varvedb").addHandler(logging.NullHandler())

_ERRORS = (
    "VarveError", "SchemaError", "UnknownFieldError", "FieldTypeError", "DimensionError",
    "BitLengthError",
    "NonFiniteVectorError", "VectorRangeError", "DuplicateIdError", "FilterError",
    "NotFoundError",
    "NotAVarveFileError", "FormatVersionError", "CorruptFileError", "WriterLockedError",
    "FileMissingError", "OptionError", "ReadOnlyError", "ClosedError", "TransactionError",
    "TransactionAbortedError", "LockTimeoutError", "StorageError", "VersionNotFoundError",
    "IndexMaintenanceError", "NotNullViolationError", "CheckViolationError", "SqlError",
    "NotSupportedError",
    "ValueTooLongError", "ValueTooLargeError", "QuerySyntaxError", "EmbedderError", "QueryTooLargeError",
    "QueryCanceledError", "BranchError", "MergeConflictError",
    # the server's and its clients' (varvedb serve, vv.Client)
    "AuthenticationError", "RequestError", "RequestTooLargeError", "ResultTooLargeError",
    "RequestTimeoutError", "ServerError", "ServerUnavailableError",
    "TransactionNotFoundError", "TransactionRequiredError", "VersionNotReachedError",
    "ReplicaReadOnlyError", "LogMismatchError")

# public name -> the module (relative to this package) that defines it
_EXPORTS = {
    "connect": ".database", "Database": ".database", "VersionInfo": ".results",
    "BranchInfo": ".reports", "Session": ".session", "Collection": ".collection",
    "Changes": ".reports", "Hit": ".results", "Hits": ".results",
    "VerifyReport": ".storage.verify", "verify_file": ".database",
    **{name: ".schema" for name in ("Field", "Int", "Float", "Bool", "Text", "Json", "Bytes",
                                    "Timestamp", "Vector", "SparseVec", "HNSW", "IVFPQ")},
    "SparseVector": ".sparse",
    **{name: ".errors" for name in _ERRORS},
    "Client": ".client", "AsyncClient": ".client", "RemoteCollection": ".client",
    "AsyncRemoteCollection": ".client",
    "connect_async": ".async_database", "AsyncDatabase": ".async_database",
    "AsyncCollection": ".async_database",
}
_MODULES = ("embed",)       # submodules named as attributes: vv.embed.register(...)

__all__ = [n for n in _EXPORTS if n not in ("RemoteCollection", "AsyncRemoteCollection")] + [
    *_MODULES]

if TYPE_CHECKING:           # what type checkers and IDEs see; nothing of it runs
    from . import embed
    from .async_database import AsyncCollection, AsyncDatabase, connect_async
    from .client import AsyncClient, AsyncRemoteCollection, Client, RemoteCollection
    from .collection import Collection
    from .database import Database, connect
    from .errors import (AuthenticationError, BranchError, CheckViolationError, ClosedError,
                         CorruptFileError,
                         DimensionError, DuplicateIdError, EmbedderError, FieldTypeError,
                         FileMissingError, FilterError, FormatVersionError,
                         IndexMaintenanceError, LockTimeoutError, LogMismatchError,
                         MergeConflictError,
                         NonFiniteVectorError, NotAVarveFileError, NotFoundError,
                         NotNullViolationError, NotSupportedError, OptionError,
                         QueryCanceledError, QuerySyntaxError, QueryTooLargeError,
                         ReadOnlyError, ReplicaReadOnlyError, RequestError,
                         RequestTimeoutError,
                         RequestTooLargeError, ResultTooLargeError, SchemaError,
                         ServerError, ServerUnavailableError, SqlError, StorageError,
                         TransactionAbortedError, TransactionError,
                         TransactionNotFoundError, TransactionRequiredError, UnknownFieldError,
                         ValueTooLargeError, ValueTooLongError, VarveError, VectorRangeError,
                         VersionNotFoundError, VersionNotReachedError, WriterLockedError)
    from .reports import BranchInfo, Changes
    from .results import Hit, Hits, VersionInfo
    from .schema import (HNSW, IVFPQ, Bool, Bytes, Field, Float, Int, Json, SparseVec, Text,
                         Timestamp, Vector)
    from .sparse import SparseVector
    from .session import Session
    from .database import verify_file
    from .storage.verify import VerifyReport


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module, __name__), name)
    elif name in _MODULES:
        value = importlib.import_module("." + name, __name__)
    else:
        raise AttributeError(f"module 'varvedb' has no attribute {name!r}")
    globals()[name] = value         # the next lookup is a plain attribute's
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS, *_MODULES})
