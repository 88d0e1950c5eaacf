"""varvedb: an embedded, single-file, versioned document + vector database.

    import varvedb as vv
    db = vv.connect("notes.varve")          # or vv.Client("http://127.0.0.1:8080", token=...)
    docs = db.create_collection("docs", {"title": "text", "embedding": vv.Vector(384)})
"""
from . import embed
from .collection import Collection
from .database import BranchInfo, Database, VersionInfo, connect
from .engine.merge import Changes
from .session import Session
from .errors import (BranchError, ClosedError, CorruptFileError, DimensionError, DuplicateIdError,
                     EmbedderError, FieldTypeError, FileMissingError, FilterError, FormatVersionError,
                     IndexMaintenanceError, LockTimeoutError, MergeConflictError,
                     NonFiniteVectorError,
                     NotAVarveFileError, NotFoundError, NotNullViolationError, OptionError,
                     NotSupportedError, QuerySyntaxError, ReadOnlyError, SchemaError, SqlError,
                     StorageError, TransactionAbortedError, TransactionError, UnknownFieldError,
                     ValueTooLongError, VarveError, VersionNotFoundError, WriterLockedError)
# the server's and its clients' (varvedb serve, vv.Client)
from .errors import (AuthenticationError, RequestError, RequestTimeoutError,
                     RequestTooLargeError, ResultTooLargeError, ServerError,
                     ServerUnavailableError)
from .errors import QueryCanceledError, QueryTooLargeError
from .results import Hit, Hits
from .schema import HNSW, IVFPQ, Bool, Field, Float, Int, Json, Text, Timestamp, Vector
from .storage.verify import VerifyReport, verify_file

__version__ = "0.1.0"

__all__ = [
    "connect", "Database", "Session", "Collection", "VersionInfo", "Hit", "Hits", "VerifyReport",
    "verify_file", "Field", "Int", "Float", "Bool", "Text", "Json", "Timestamp", "Vector",
    "HNSW", "IVFPQ", "VarveError", "SchemaError", "UnknownFieldError", "FieldTypeError",
    "DimensionError", "NonFiniteVectorError", "DuplicateIdError", "FilterError",
    "NotFoundError", "NotAVarveFileError", "FormatVersionError", "CorruptFileError",
    "WriterLockedError", "FileMissingError", "OptionError", "ReadOnlyError", "ClosedError",
    "TransactionError", "TransactionAbortedError", "LockTimeoutError", "StorageError",
    "VersionNotFoundError", "IndexMaintenanceError", "NotNullViolationError",
    "SqlError", "NotSupportedError", "ValueTooLongError", "QuerySyntaxError", "EmbedderError",
    "QueryTooLargeError", "QueryCanceledError",
    "AuthenticationError", "RequestError", "RequestTooLargeError", "ResultTooLargeError",
    "RequestTimeoutError", "ServerError", "ServerUnavailableError",
    "BranchError", "MergeConflictError", "BranchInfo", "Changes",
    "embed", "Client", "AsyncClient",
]

# The server's clients load on first use: `import varvedb` stays free of
# http.client, and of httpx (AsyncClient's transport, the "server" extra).
_CLIENTS = ("Client", "AsyncClient", "RemoteCollection", "AsyncRemoteCollection")


def __getattr__(name: str):
    if name in _CLIENTS:
        from . import client
        return getattr(client, name)
    raise AttributeError(f"module 'varvedb' has no attribute {name!r}")
