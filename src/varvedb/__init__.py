"""varvedb: an embedded, single-file, versioned document + vector database.

    import varvedb as vv
    db = vv.connect("notes.varve")
    docs = db.create_collection("docs", {"title": "text", "embedding": vv.Vector(384)})
"""
from . import embed
from .collection import Collection
from .database import Database, VersionInfo, connect
from .session import Session
from .errors import (ClosedError, CorruptFileError, DimensionError, DuplicateIdError,
                     EmbedderError, FieldTypeError, FileMissingError, FilterError, FormatVersionError,
                     IndexMaintenanceError, LockTimeoutError, NonFiniteVectorError,
                     NotAVarveFileError, NotFoundError, NotNullViolationError, OptionError,
                     NotSupportedError, QuerySyntaxError, ReadOnlyError, SchemaError, SqlError,
                     StorageError, TransactionAbortedError, TransactionError, UnknownFieldError,
                     ValueTooLongError, VarveError, VersionNotFoundError, WriterLockedError)
from .results import Hit, Hits
from .schema import HNSW, Bool, Field, Float, Int, Json, Text, Timestamp, Vector
from .storage.verify import VerifyReport, verify_file

__version__ = "0.1.0"

__all__ = [
    "connect", "Database", "Session", "Collection", "VersionInfo", "Hit", "Hits", "VerifyReport",
    "verify_file", "Field", "Int", "Float", "Bool", "Text", "Json", "Timestamp", "Vector",
    "HNSW", "VarveError", "SchemaError", "UnknownFieldError", "FieldTypeError",
    "DimensionError", "NonFiniteVectorError", "DuplicateIdError", "FilterError",
    "NotFoundError", "NotAVarveFileError", "FormatVersionError", "CorruptFileError",
    "WriterLockedError", "FileMissingError", "OptionError", "ReadOnlyError", "ClosedError",
    "TransactionError", "TransactionAbortedError", "LockTimeoutError", "StorageError",
    "VersionNotFoundError", "IndexMaintenanceError", "NotNullViolationError",
    "SqlError", "NotSupportedError", "ValueTooLongError", "QuerySyntaxError", "EmbedderError",
    "embed",
]
