"""The node's key directory (its Ed25519 signing key and the at-rest data key) and the
witnesses of its stores' change-log heads.

Keys are kept apart from the store file, so someone who can rewrite the store file but not
the keys cannot forge its history or the seals on its rows. Witnesses are kept apart from
both: by default in the per-user *state* directory (``amcp.paths.default_witness_dir``), not
beside the store, because restoring a whole store directory (keys included) from an older
copy must still be caught as a rollback (docs/store.md, "What each setup detects").

Keys are created at most once, even by several processes opening a new store at the same
moment: a new key file is linked into place only if none exists (``os.link`` fails on an
existing name), and a process that loses the race loads the winner's key.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from amcp.errors import StoreError, StoreIntegrityError
from amcp.subkeys import derive_key

if TYPE_CHECKING:  # imported where used: checksum-only readers never load cryptography
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_NONCE = 12
_WITNESS_WIDTH = 96  # "seq sha256hex" padded; well under one disk sector


def _create_private(path: Path, data: bytes) -> bytes:
    """Create ``path`` holding ``data`` (mode 0600 from the first byte) unless it exists;
    return what the file holds afterwards — ours, or the key another process created first.

    The file is written whole under a temporary name and then hard-linked to ``path``: a
    link never replaces an existing name, so of several processes creating a key at once
    exactly one wins, and nobody reads a half-written key."""
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}.{secrets.token_hex(4)}")
    _write_new(tmp, data)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass  # another process was first: use its key
    except OSError:  # a file system without hard links: exclusive create in place
        with contextlib.suppress(FileExistsError):
            _write_new(path, data)
    finally:
        tmp.unlink(missing_ok=True)
    return path.read_bytes()


def _write_new(path: Path, data: bytes) -> None:
    """Create ``path`` (FileExistsError if it exists), mode 0600, holding ``data``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class Witness:
    seq: int
    head: str  # hex of the chain hash at seq


class Keyring:
    """Loads or creates the keys in ``directory`` (created 0700 on first use).

    ``witness_dirs``: where change-log heads are witnessed, the first one also holding the
    incremental-check marks. Default: the per-user state directory
    (``amcp.paths.default_witness_dir``). More than one: a rollback is caught if any of them
    has seen a later head."""

    def __init__(self, directory: Path, *, witness_dirs: Sequence[Path] | None = None) -> None:
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        except OSError as exc:
            raise StoreError(f"cannot create key directory {self.directory}: {exc}") from exc
        if witness_dirs is None:
            from amcp.paths import default_witness_dir

            witness_dirs = (Path(default_witness_dir()),)
        if not witness_dirs:
            raise StoreError("at least one witness directory is needed")
        self.witness_dirs = tuple(Path(d) for d in witness_dirs)
        self._signing: Ed25519PrivateKey | None = None
        self._data: AESGCM | None = None
        self._raw_data: bytes | None = None

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
                pem = path.read_bytes()
            else:
                fresh = Ed25519PrivateKey.generate()
                pem = _create_private(
                    path, fresh.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())
                )
            try:
                key = load_pem_private_key(pem, password=None)
            except ValueError as exc:
                raise StoreError(f"{path} is not a readable private key: {exc}") from exc
            if not isinstance(key, Ed25519PrivateKey):
                raise StoreError(f"{path} is not an Ed25519 private key")
            self._signing = key
        return self._signing

    @property
    def data_key(self) -> bytes:
        """The 32-byte at-rest secret (``data.key``), created on first use. Sub-keys for other
        purposes are derived from it (``derive``), never used as it is."""
        if self._raw_data is None:
            path = self.directory / "data.key"
            raw = path.read_bytes() if path.exists() else _create_private(
                path, secrets.token_bytes(32)
            )
            if len(raw) != 32:
                raise StoreError(f"{path} is not a 32-byte key")
            self._raw_data = raw
        return self._raw_data

    def derive(self, purpose: str) -> bytes:
        """A 32-byte key for one purpose (``"row-seal"``, ``"content-key"``): HMAC-SHA256 of
        the data key over a label, so a key for one use reveals nothing of another's."""
        return derive_key(self.data_key, purpose)

    @property
    def _aead(self) -> AESGCM:
        if self._data is None:
            from cryptography.hazmat.primitives.ciphers.aead import AESGCM

            self._data = AESGCM(self.data_key)
        return self._data

    def seal(self, plaintext: bytes, aad: bytes) -> bytes:
        """Encrypt at rest (AES-256-GCM); ``aad`` binds the ciphertext to its record id."""
        nonce = secrets.token_bytes(_NONCE)
        return nonce + self._aead.encrypt(nonce, plaintext, aad)

    def open(self, blob: bytes, aad: bytes) -> bytes:
        try:
            return self._aead.decrypt(blob[:_NONCE], blob[_NONCE:], aad)
        except Exception as exc:  # cryptography raises InvalidTag; any failure means the same
            raise StoreIntegrityError(
                "encrypted record does not decrypt: tampered or wrong key"
            ) from exc

    # -- witnesses of change-log heads --------------------------------------------------

    def _witness_path(self, store_id: str, kind: str = "head", where: Path | None = None) -> Path:
        return (where or self.witness_dirs[0]) / f"{store_id}.{kind}"

    def places(self, also: Sequence[Path] = ()) -> list[Path]:
        """This keyring's witness directories, then ``also`` (a store's remembered ones)."""
        return list(dict.fromkeys([*self.witness_dirs, *also]))

    def read_witness(self, store_id: str, also: Sequence[Path] = ()) -> Witness | None:
        """The latest head any witness directory has seen (None: none has seen one)."""
        found = [w for _d, w in self.read_witnesses(store_id, also) if w is not None]
        return max(found, key=lambda w: w.seq) if found else None

    def read_witnesses(
        self, store_id: str, also: Sequence[Path] = ()
    ) -> list[tuple[Path, Witness | None]]:
        """Each witness directory with what it has seen of ``store_id``. A directory that
        cannot be read counts as having seen nothing (a missing witness is judged by the
        caller: all of them missing is what matters)."""
        out: list[tuple[Path, Witness | None]] = []
        for where in self.places(also):
            try:
                out.append((where, self._read_mark(self._witness_path(store_id, where=where))))
            except OSError:
                out.append((where, None))
        return out

    def write_witness(
        self, store_id: str, witness: Witness, also: Sequence[Path] = ()
    ) -> None:
        """Overwrite the witness in place: one fixed-width write, no fsync, no rename.

        It runs after every committed write, so it must be cheap (an fsync + rename costs
        ~10 ms). A witness that lags after a power cut only weakens rollback detection for
        the last commits; it never refuses a good store. One write below a disk sector does
        not tear in practice, and the fixed width means no stale tail can remain.
        """
        for where in self.places(also):
            self._write_mark(self._witness_path(store_id, where=where), witness)

    def read_verified(self, store_id: str) -> Witness | None:
        """How far an open of this store last walked the change log and found it intact
        (``SQLiteStore.verify(incremental=True)``); None if never. The mark only saves work:
        one that cannot be read (a write cut short) counts as none, so the next open walks
        the whole log instead of refusing the store."""
        try:
            return self._read_mark(self._witness_path(store_id, "verified"))
        except (StoreIntegrityError, OSError):
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
            raise StoreIntegrityError(f"witness file {path} is malformed") from exc

    @staticmethod
    def _write_mark(path: Path, mark: Witness) -> None:
        if not path.parent.is_dir():
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        line = f"{mark.seq} {mark.head}".ljust(_WITNESS_WIDTH - 1) + "\n"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            os.pwrite(fd, line.encode("ascii"), 0)
        finally:
            os.close(fd)
