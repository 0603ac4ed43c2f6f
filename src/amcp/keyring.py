"""The node's key directory: its Ed25519 signing key, the at-rest data key, and witnesses.

Kept apart from the store file on purpose: the signed head of a store's change log is also
written here, so someone who can rewrite the store file but not this directory cannot roll
the store back or forge its history unnoticed (ARCHITECTURE: tamper evidence).
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from amcp.errors import IntegrityError, StoreError

if TYPE_CHECKING:  # imported where used: checksum-only readers never load cryptography
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_NONCE = 12
_WITNESS_WIDTH = 96  # "seq sha256hex" padded; well under one disk sector


def _write_private(path: Path, data: bytes) -> None:
    """Write a secret atomically with mode 0600 from the first byte."""
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


@dataclass(frozen=True, slots=True)
class Witness:
    seq: int
    head: str  # hex of the chain hash at seq


class Keyring:
    """Loads or creates the keys in ``directory`` (created 0700 on first use)."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StoreError(f"cannot create key directory {self.directory}: {exc}") from exc
        self._signing: Ed25519PrivateKey | None = None
        self._data: AESGCM | None = None

    @property
    def signing_key(self) -> Ed25519PrivateKey:
        if self._signing is None:
            from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
            from cryptography.hazmat.primitives.serialization import (
                Encoding,
                NoEncryption,
                PrivateFormat,
                load_pem_private_key,
            )

            path = self.directory / "node.ed25519.pem"
            if path.exists():
                key = load_pem_private_key(path.read_bytes(), password=None)
                if not isinstance(key, Ed25519PrivateKey):
                    raise StoreError(f"{path} is not an Ed25519 private key")
                self._signing = key
            else:
                self._signing = Ed25519PrivateKey.generate()
                pem = self._signing.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
                _write_private(path, pem)
        return self._signing

    @property
    def _aead(self) -> AESGCM:
        if self._data is None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            path = self.directory / "data.key"
            if path.exists():
                raw = path.read_bytes()
                if len(raw) != 32:
                    raise StoreError(f"{path} is not a 32-byte key")
            else:
                raw = secrets.token_bytes(32)
                _write_private(path, raw)
            self._data = AESGCM(raw)
        return self._data

    def seal(self, plaintext: bytes, aad: bytes) -> bytes:
        """Encrypt at rest (AES-256-GCM); ``aad`` binds the ciphertext to its record id."""
        nonce = secrets.token_bytes(_NONCE)
        return nonce + self._aead.encrypt(nonce, plaintext, aad)

    def open(self, blob: bytes, aad: bytes) -> bytes:
        try:
            return self._aead.decrypt(blob[:_NONCE], blob[_NONCE:], aad)
        except Exception as exc:  # cryptography raises InvalidTag; any failure means the same
            raise IntegrityError(
                "encrypted record does not decrypt: tampered or wrong key"
            ) from exc

    # -- witnesses of change-log heads --------------------------------------------------

    def _witness_path(self, store_id: str, kind: str = "head") -> Path:
        return self.directory / "witness" / f"{store_id}.{kind}"

    def read_witness(self, store_id: str) -> Witness | None:
        return self._read_mark(self._witness_path(store_id))

    def write_witness(self, store_id: str, witness: Witness) -> None:
        """Overwrite the witness in place: one fixed-width write, no fsync, no rename.

        It runs after every committed write, so it must be cheap (an fsync + rename costs
        ~10 ms). A witness that lags after a power cut only weakens rollback detection for
        the last commits; it never refuses a good store. One write below a disk sector does
        not tear in practice, and the fixed width means no stale tail can remain.
        """
        self._write_mark(self._witness_path(store_id), witness)

    def read_verified(self, store_id: str) -> Witness | None:
        """How far an open of this store last walked the change log and found it intact
        (``SQLiteStore.verify(incremental=True)``); None if never. The mark only saves work:
        one that cannot be read (a write cut short) counts as none, so the next open walks
        the whole log instead of refusing the store."""
        try:
            return self._read_mark(self._witness_path(store_id, "verified"))
        except (IntegrityError, OSError):
            return None

    def write_verified(self, store_id: str, mark: Witness) -> None:
        self._write_mark(self._witness_path(store_id, "verified"), mark)

    @staticmethod
    def _read_mark(path: Path) -> Witness | None:
        if not path.exists():
            return None
        try:
            seq_text, head = path.read_text().split()
            return Witness(int(seq_text), head)
        except ValueError as exc:
            raise IntegrityError(f"witness file {path} is malformed") from exc

    @staticmethod
    def _write_mark(path: Path, mark: Witness) -> None:
        if not path.parent.is_dir():
            path.parent.mkdir(exist_ok=True, mode=0o700)
        line = f"{mark.seq} {mark.head}".ljust(_WITNESS_WIDTH - 1) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.pwrite(fd, line.encode("ascii"), 0)
        finally:
            os.close(fd)
