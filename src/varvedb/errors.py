"""The errors varvedb raises.

Every mistake a user can make (bad input, a bad file, a lock held by another
process) raises a subclass of `VarveError` whose message names the problem.
A call that raises one of these has changed nothing: validation runs before
any byte is written or any in-memory state is touched.
"""


class VarveError(Exception):
    """Base class of every error varvedb raises on purpose.

    `sqlstate` is PostgreSQL's code for the same condition, so SQL clients
    (db.sql, the shell, the server) can report it the way psql does."""
    sqlstate = "XX000"


class SchemaError(VarveError):
    """A schema (field spec, index spec, collection name) is not valid."""
    sqlstate = "42P16"


class UnknownFieldError(VarveError):
    """A row, filter or call names a field the collection does not have."""
    sqlstate = "42703"


class FieldTypeError(VarveError):
    """A value does not fit its field's type (e.g. a string for an int field)."""
    sqlstate = "22P02"


class ValueTooLongError(FieldTypeError):
    """A text value is longer than its field's max_length (SQL's varchar(n);
    SQLSTATE 22001, string_data_right_truncation)."""
    sqlstate = "22001"


class ValueTooLargeError(FieldTypeError):
    """A text, json or bytes value is over the 16 MiB a value may be, encoded
    (SQLSTATE 54000, program_limit_exceeded: a limit of varvedb's, not a wrong type)."""
    sqlstate = "54000"


class DimensionError(VarveError):
    """A vector does not have the dimension its field declares."""
    sqlstate = "22000"


class BitLengthError(DimensionError):
    """A bit string's length is not its bit field's (SQL's bit(n); SQLSTATE 22026,
    string_data_length_mismatch)."""
    sqlstate = "22026"


class NonFiniteVectorError(VarveError, ValueError):
    """A vector holds NaN or an infinity. (Also a ValueError: the kernels' own
    check of a query vector raises it, under callers that catch ValueError.)"""
    sqlstate = "22000"


class VectorRangeError(NonFiniteVectorError):
    """A vector element past the range of the type it is stored or indexed as: a
    vector's past float32's, a halfvec's past float16's +-65504 (in a halfvec
    field, or where an expression index casts a vector to halfvec), as pgvector
    refuses them: SQLSTATE 22003, numeric_value_out_of_range."""
    sqlstate = "22003"


class DuplicateIdError(VarveError):
    """`insert` was given an id that is already taken (or twice in one batch)."""
    sqlstate = "23505"


class FilterError(VarveError):
    """A `where=` expression is malformed or uses an unsupported construct."""
    sqlstate = "42601"


class NotFoundError(VarveError):
    """A collection (or other named object) does not exist."""
    sqlstate = "42P01"


class FileMissingError(VarveError, FileNotFoundError):
    """A read-only open names a file that does not exist (a writer would create it)."""


class OptionError(VarveError, ValueError):
    """An option passed to connect (or another call) has a value it does not take."""
    sqlstate = "22023"


class EmbedderError(OptionError):
    """An embedder spec names nothing usable (unknown, a model folder that is
    missing or incomplete, a library or model package not installed, a model
    not on disk), or an embedder returned vectors of the wrong shape or values."""


class NotAVarveFileError(VarveError):
    """The file is not a varvedb file (bad magic, or header damaged)."""
    sqlstate = "58000"


class FormatVersionError(VarveError):
    """The file was written by a newer format version than this library reads."""
    sqlstate = "58000"


class CorruptFileError(VarveError):
    """The file's structure is damaged in a way recovery cannot skip."""
    sqlstate = "XX001"


class WriterLockedError(VarveError):
    """Another connection (this or another process) holds the file's write lock."""
    sqlstate = "55006"


class ReadOnlyError(VarveError):
    """A write was attempted on a read-only connection."""
    sqlstate = "25006"


class ReplicaReadOnlyError(ReadOnlyError):
    """A write sent to a read replica (`varvedb serve --replica-of URL`): its
    message names the leader, where writes go (HTTP 421); nothing changed."""
    sqlstate = "25006"


class LogMismatchError(VarveError):
    """A follower asked for the log after a version and chain hash the leader's
    file does not hold: another file, a tampered leader, or a version the
    leader's vacuum dropped (HTTP 409). The follower re-seeds from the leader's
    backup stream."""
    sqlstate = "55000"


class ClosedError(VarveError):
    """The database was closed."""
    sqlstate = "08003"


class TransactionError(VarveError):
    """A transaction was used wrongly (nested on another thread, used after end)."""
    sqlstate = "25000"


class TransactionAbortedError(TransactionError):
    """A write inside this transaction failed, so it cannot commit: roll it back.

    Like PostgreSQL's "current transaction is aborted" (SQLSTATE 25P02): the
    transaction's earlier writes were undone when the failure happened."""
    sqlstate = "25P02"


class StorageError(VarveError, OSError):
    """A write or sync of the file failed (ENOSPC, EFBIG, EIO, ...), or a path
    could not be opened (a directory, a path under a regular file, no permission).

    After a failed write the file and the connection are back at the last
    acknowledged commit; the connection is usable again once the cause is gone
    (space freed, say).
    `errno` and `os_error` carry the operating system's error."""
    sqlstate = "58030"

    def __init__(self, message: str, os_error: OSError | None = None):
        super().__init__(os_error.errno if os_error else None, message)
        self.os_error = os_error

    def __str__(self) -> str:
        return self.strerror or ""


class VersionNotFoundError(VarveError):
    """An `as_of` names a version that the file does not (or no longer) hold."""
    sqlstate = "22023"


class BranchError(VarveError):
    """A branch that cannot do this: dropped, main dropped, a schema change off main."""
    sqlstate = "0A000"


class MergeConflictError(VarveError):
    """A merge found documents changed on both sides since their common version
    (to different values); nothing was written. `conflicts`: collection -> ids."""
    sqlstate = "40001"

    def __init__(self, message: str, conflicts: dict):
        super().__init__(message)
        self.conflicts = conflicts


class LockTimeoutError(TransactionError):
    """Another session held the write transaction for longer than the timeout.

    Like PostgreSQL's lock_not_available (SQLSTATE 55P03): nothing was written;
    retry once the other session commits or rolls back."""
    sqlstate = "55P03"


class IndexMaintenanceError(VarveError):
    """Linking committed rows into a vector index failed in the background.

    Nothing is lost: the rows are in the file and searches find them by exact
    scan until they are linked. Raised once, by the next `index_status` or
    `close`; the next commit tries again."""
    sqlstate = "XX000"


class SqlError(VarveError):
    """An SQL statement that cannot run, with PostgreSQL's SQLSTATE and, for
    a syntax error, the 1-based character `position` in the statement; `detail`
    and `hint` where it has them (the wire's DETAIL and HINT fields)."""
    detail: str | None = None
    hint: str | None = None

    def __init__(self, sqlstate: str, message: str, position: int | None = None):
        super().__init__(message)
        self.sqlstate = sqlstate
        self.position = position


class NotSupportedError(SqlError):
    """Valid PostgreSQL that varvedb does not do (SQLSTATE 0A000)."""

    def __init__(self, message: str):
        super().__init__("0A000", message)


class NotNullViolationError(VarveError):
    """A write would leave a null in a field declared not_null (given as None,
    or omitted from a row when the field has no default), or a not_null field
    without a default was added to a collection that has documents.

    Like PostgreSQL's not_null_violation (SQLSTATE 23502): nothing was written."""
    sqlstate = "23502"


class CheckViolationError(VarveError):
    """A write would give a field a value its CHECK constraint (SQL's `CHECK (price >
    0)`, a Field's `check`) finds false. Like PostgreSQL's check_violation (SQLSTATE
    23514): nothing was written."""
    sqlstate = "23514"


class QuerySyntaxError(VarveError):
    """A full-text query (search(text=...), SQL's `body @@ 'query'`) is malformed:
    an unclosed quote or parenthesis, a dangling OR, a lone `-`, an empty query,
    a group of only negations. `position` is the 1-based character offset in
    the query where the problem is (SQLSTATE 42601, syntax_error)."""
    sqlstate = "42601"

    def __init__(self, message: str, position: int):
        super().__init__(message)
        self.position = position


class QueryTooLargeError(QuerySyntaxError):
    """A full-text query carries more distinct terms, once analyzed, than the
    1 024 a query may (Lucene's default clause limit): SQLSTATE 54000,
    program_limit_exceeded. `position` is None (the count is of the whole query)."""
    sqlstate = "54000"


class QueryCanceledError(VarveError):
    """A read was canceled before it finished: the server gave up on it at its
    timeout (varvedb.cancel), so it stopped instead of computing an answer no one
    reads. Nothing was changed (SQLSTATE 57014, query_canceled)."""
    sqlstate = "57014"


# ---- the server and its client (varvedb serve, vv.Client) ------------------------

class AuthenticationError(VarveError):
    """The server wants a token and the request had none, or a wrong one (HTTP 401)."""
    sqlstate = "28000"


class RequestError(VarveError):
    """A request the server cannot read: malformed JSON, a body of the wrong
    shape or type (HTTP 400, or 415 for a content type a route does not take)."""
    sqlstate = "08P01"


class RequestTooLargeError(RequestError):
    """A request body over the server's size cap (HTTP 413)."""
    sqlstate = "54000"


class ResultTooLargeError(VarveError):
    """A query would answer more rows than the server's result cap (HTTP 422):
    ask for fewer (limit) or page through them."""
    sqlstate = "54000"


class RequestTimeoutError(VarveError):
    """A read ran past the server's per-request timeout (HTTP 504); nothing changed."""
    sqlstate = "57014"


class VersionNotReachedError(RequestTimeoutError):
    """A read asked to be answered at a version (X-Varve-Min-Version: the client's
    last write) that the read worker did not reach within the wait (HTTP 504);
    nothing changed. The version may be another server's."""


class TransactionNotFoundError(NotFoundError, TransactionError):
    """A request named a transaction (`X-Varve-Transaction`) the server does not
    hold: never opened, or ended — committed, rolled back, rolled back after its
    idle timeout or when the server stopped (HTTP 404). Nothing of the request
    ran; nothing ran outside the transaction in its place."""
    sqlstate = "25P01"


class TransactionRequiredError(TransactionError):
    """SQL that opens or ends a transaction block the request cannot hold: a BEGIN
    left open at the end of a request, or a COMMIT / ROLLBACK with no transaction
    (HTTP 409). Over HTTP a transaction spans requests only when opened
    (POST /transactions, Client.transaction()); nothing of the request ran."""
    sqlstate = "25000"


class ServerError(VarveError):
    """The server failed in a way that is not one of the typed errors (HTTP 5xx)."""
    sqlstate = "XX000"


class ServerUnavailableError(VarveError, ConnectionError):
    """The client could not reach the server (refused, reset, timed out)."""
    sqlstate = "08006"
