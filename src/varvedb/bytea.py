"""bytea's text forms (SQL's binary strings, a bytes field's values): what a literal, a
COPY field or a text parameter means (PostgreSQL's byteain), and how a value prints
(byteaout with bytea_output 'hex'). Kept apart from query/literals.py so that the
client, which imports no engine, writes a bytes parameter in it too."""
from __future__ import annotations

import re

from .errors import SqlError

# the hex form's digit pairs, whitespace before each and at the end (none inside a pair)
_HEX_PAIRS = re.compile(r"(?:[ \t\n\r]*[0-9A-Fa-f]{2})*[ \t\n\r]*")
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_ESCAPE = re.compile(rb"\\(\\|[0-3][0-7][0-7])")


def parse_bytea(text: str) -> bytes:
    r"""bytea's input: the hex form '\x0aff' (digit pairs, whitespace between pairs),
    or the escape form (a byte '\ooo' in octal, '\\' a backslash, any other
    character its UTF-8 bytes). PostgreSQL's errors: 22023 for a bad hex digit or
    an odd count of them, 22P02 for a backslash that starts no escape."""
    if text[:2] == "\\x":
        end = _HEX_PAIRS.match(text, 2).end()
        if end < len(text):     # at a digit that starts no pair, or at no digit
            pair = text[end:end + 2]
            if pair[0] in _HEX_DIGITS and len(pair) == 1:
                raise SqlError("22023", "invalid hexadecimal data: odd number of digits")
            bad = pair[1] if pair[0] in _HEX_DIGITS else pair[0]
            raise SqlError("22023", f'invalid hexadecimal digit: "{bad}"')
        return bytes.fromhex(text[2:])
    raw = text.encode("utf-8")
    out, at = bytearray(), 0
    for m in _ESCAPE.finditer(raw):
        if b"\\" in raw[at:m.start()]:
            break
        out += raw[at:m.start()]
        out.append(92 if m.group(1) == b"\\" else int(m.group(1), 8))
        at = m.end()
    if b"\\" in raw[at:]:
        raise SqlError("22P02", "invalid input syntax for type bytea")
    return bytes(out + raw[at:])


def bytea_text(b: bytes) -> str:
    r"""bytea as PostgreSQL prints it (bytea_output 'hex'): \x0102."""
    return "\\x" + b.hex()
