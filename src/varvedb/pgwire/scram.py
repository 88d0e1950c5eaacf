"""SCRAM-SHA-256 (RFC 5802, RFC 7677) on the server's side, as PostgreSQL
speaks it: the password is the server's token, never sent; the client proves
it knows it and the server proves it back. No channel binding (the client's
GS2 header must be "n" or "y"); the user name in the exchange is ignored, as
PostgreSQL ignores it (the start-up packet names the user).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

MECHANISM = "SCRAM-SHA-256"
ITERATIONS = 4096


class AuthFailed(Exception):
    """The client's proof or messages are wrong: 28P01."""


class Verifier:
    """What the server keeps of the password: salt, stored key, server key."""

    def __init__(self, password: str, iterations: int = ITERATIONS):
        self.salt = secrets.token_bytes(16)
        self.iterations = iterations
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), self.salt, iterations)
        self.stored_key = hashlib.sha256(_hmac(salted, b"Client Key")).digest()
        self.server_key = _hmac(salted, b"Server Key")


class Exchange:
    """One client's exchange: `first(client_first)` gives the server-first
    message, `final(client_final)` checks the proof and gives the server-final."""

    def __init__(self, verifier: Verifier):
        self.v = verifier
        self._bare = self._server_first = self._nonce = None

    def first(self, client_first: str) -> str:
        gs2, sep, bare = _gs2(client_first)
        attrs = _attrs(bare)
        cnonce = attrs.get("r")
        if not cnonce:
            raise AuthFailed("the client's first SCRAM message has no nonce")
        self._gs2, self._bare = gs2, bare
        self._nonce = cnonce + base64.b64encode(secrets.token_bytes(18)).decode()
        self._server_first = (f"r={self._nonce},s={base64.b64encode(self.v.salt).decode()},"
                              f"i={self.v.iterations}")
        return self._server_first

    def final(self, client_final: str) -> str:
        if self._server_first is None:
            raise AuthFailed("SCRAM messages out of order")
        without_proof, sep, proof_part = client_final.rpartition(",p=")
        if not sep:
            raise AuthFailed("the client's final SCRAM message has no proof")
        attrs = _attrs(without_proof)
        if attrs.get("r") != self._nonce:
            raise AuthFailed("the SCRAM nonce does not match")
        if attrs.get("c") != base64.b64encode(self._gs2.encode()).decode():
            raise AuthFailed("the SCRAM channel binding does not match")
        try:
            proof = base64.b64decode(proof_part, validate=True)
        except ValueError:
            raise AuthFailed("the SCRAM proof is not base64") from None
        auth_message = f"{self._bare},{self._server_first},{without_proof}".encode()
        signature = _hmac(self.v.stored_key, auth_message)
        if len(proof) != len(signature):
            raise AuthFailed("password authentication failed")
        client_key = bytes(a ^ b for a, b in zip(proof, signature))
        if not hmac.compare_digest(hashlib.sha256(client_key).digest(), self.v.stored_key):
            raise AuthFailed("password authentication failed")
        server_signature = _hmac(self.v.server_key, auth_message)
        return "v=" + base64.b64encode(server_signature).decode()


def _hmac(key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, hashlib.sha256).digest()


def _gs2(message: str) -> tuple[str, str, str]:
    """(gs2 header with its trailing comma, '', the bare message)."""
    parts = message.split(",", 2)
    if len(parts) != 3 or parts[0] not in ("n", "y"):
        raise AuthFailed("SCRAM channel binding is not supported; connect without it "
                         "(channel_binding=disable)")
    return f"{parts[0]},{parts[1]},", "", parts[2]


def _attrs(message: str) -> dict[str, str]:
    out = {}
    for part in message.split(","):
        name, sep, value = part.partition("=")
        if sep and len(name) == 1:
            out.setdefault(name, value)
    return out
