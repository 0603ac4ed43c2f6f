"""Trust levels backed by X.509 chains of Ed25519 certificates (PROFILE §4, upstream L1).

``local`` needs only configuration; ``verified`` needs a chain from the peer's key to one of
our anchors; ``federated`` needs that in both directions, i.e. we must also hold a chain the
peer can verify. These functions are what ``amcp trust`` (anchor, issue, verify) calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.x509.oid import NameOID

from amcp.errors import ConfigError, ForbiddenError, UnauthorizedError, ValidationError
from amcp.session.hello import Hello, LocalNode, TrustLevel
from amcp.session.identity import NodeURI, raw_public_key

DEFAULT_ANCHOR_DAYS = 3650
DEFAULT_NODE_DAYS = 365
# A chain longer than this is a resource attack more likely than a real PKI.
MAX_CHAIN_LENGTH = 8


def utc_now() -> datetime:
    """The one wall-clock read in amcp.session; TrustConfig lets callers replace it."""
    return datetime.now(UTC)


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def create_anchor(
    common_name: str,
    key: Ed25519PrivateKey | None = None,
    *,
    not_before: datetime | None = None,
    days: int = DEFAULT_ANCHOR_DAYS,
) -> tuple[x509.Certificate, Ed25519PrivateKey]:
    """A self-signed Ed25519 CA certificate to configure as a trust anchor."""
    key = key or Ed25519PrivateKey.generate()
    start = not_before or utc_now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_ca_usage(), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, algorithm=None)
    )
    return cert, key


def _ca_usage() -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=False,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )


def issue_certificate(
    issuer_cert: x509.Certificate,
    issuer_key: Ed25519PrivateKey,
    public_key: bytes | Ed25519PublicKey,
    *,
    node_address: NodeURI | str | None = None,
    common_name: str | None = None,
    ca: bool = False,
    not_before: datetime | None = None,
    days: int = DEFAULT_NODE_DAYS,
) -> x509.Certificate:
    """Issue a node certificate (or, with ``ca=True``, an intermediate) for an Ed25519 key.

    The node URI goes into a URI SubjectAlternativeName; verification compares it with the
    hello's address on everything but the capability fingerprint.
    """
    pub = (
        Ed25519PublicKey.from_public_bytes(public_key)
        if isinstance(public_key, bytes)
        else public_key
    )
    address = NodeURI.parse(node_address) if isinstance(node_address, str) else node_address
    cn = common_name or (str(address) if address is not None else raw_public_key(pub).hex()[:16])
    start = not_before or utc_now()
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(issuer_cert.subject)
        .public_key(pub)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(pub), critical=False)
    )
    if ca:
        builder = builder.add_extension(_ca_usage(), critical=True)
    if address is not None:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.UniformResourceIdentifier(str(address))]),
            critical=False,
        )
    return builder.sign(issuer_key, algorithm=None)


# ------------------------------------------------------------------------------------ PEM


def certs_to_pem(certs: Sequence[x509.Certificate]) -> str:
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode("ascii") for c in certs)


def load_pem_chain(pem: str | bytes) -> list[x509.Certificate]:
    data = pem.encode("ascii") if isinstance(pem, str) else pem
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError as exc:
        raise UnauthorizedError(f"cert_chain is not PEM X.509: {exc}") from None
    if not certs:
        raise UnauthorizedError("cert_chain holds no certificate")
    return certs


def load_anchors(path: Path) -> tuple[x509.Certificate, ...]:
    try:
        return tuple(load_pem_chain(path.read_bytes()))
    except OSError as exc:
        raise ConfigError(f"cannot read trust anchors {path}: {exc.strerror}") from exc
    except UnauthorizedError as exc:
        raise ConfigError(f"trust anchors {path}: {exc}") from exc


# ----------------------------------------------------------------------------- verify


def _check_validity(cert: x509.Certificate, at: datetime, what: str) -> None:
    if not cert.not_valid_before_utc <= at <= cert.not_valid_after_utc:
        raise UnauthorizedError(f"{what} is not valid at {at:%Y-%m-%dT%H:%M:%SZ}")


def _is_ca(cert: x509.Certificate) -> tuple[bool, int | None]:
    try:
        bc = cert.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return False, None
    return bc.ca, bc.path_length


def _check_issued(child: x509.Certificate, issuer: x509.Certificate, what: str) -> None:
    if not isinstance(issuer.public_key(), Ed25519PublicKey):
        raise UnauthorizedError(f"issuer of {what} does not hold an Ed25519 key")
    try:
        child.verify_directly_issued_by(issuer)
    except (ValueError, TypeError, InvalidSignature):
        raise UnauthorizedError(f"{what} is not signed by its issuer") from None


def _uri_sans(cert: x509.Certificate) -> list[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return san.get_values_for_type(x509.UniformResourceIdentifier)


def verify_chain(
    chain: Sequence[x509.Certificate],
    anchors: Sequence[x509.Certificate],
    *,
    public_key: bytes,
    at: datetime,
    node_address: NodeURI | None = None,
) -> x509.Certificate:
    """Check ``chain`` (leaf first) up to one of ``anchors``; return the anchor it ends at.

    Checks: every certificate and the anchor valid at ``at``; every signature; issuers are
    CAs within their path length; the leaf is not a CA; the leaf's key equals the hello's
    ``public_key``; a URI SAN on the leaf names the same node as ``node_address``.
    Raises UnauthorizedError (401) on any failure.
    """
    if not chain:
        raise UnauthorizedError("empty certificate chain")
    if len(chain) > MAX_CHAIN_LENGTH:
        raise UnauthorizedError(f"certificate chain longer than {MAX_CHAIN_LENGTH}")
    if not anchors:
        raise UnauthorizedError("no trust anchor is configured")
    leaf = chain[0]
    leaf_key = leaf.public_key()
    if not isinstance(leaf_key, Ed25519PublicKey) or raw_public_key(leaf_key) != public_key:
        raise UnauthorizedError("leaf certificate key does not match the hello's public_key")
    if _is_ca(leaf)[0]:
        raise UnauthorizedError("leaf certificate is a CA certificate")
    if node_address is not None:
        for uri in _uri_sans(leaf):
            try:
                named = NodeURI.parse(uri)
            except ValidationError:
                raise UnauthorizedError(f"leaf certificate names a bad node URI {uri!r}") from None
            if not named.same_node(node_address):
                raise UnauthorizedError(f"leaf certificate is for {uri}, not {node_address}")
    path = _path_to_anchor(chain, anchors)
    for depth in range(len(path) - 1):
        cert, issuer = path[depth], path[depth + 1]
        what = "leaf certificate" if depth == 0 else f"certificate {depth} of the chain"
        _check_validity(cert, at, what)
        is_ca, path_length = _is_ca(issuer)
        if not is_ca:
            raise UnauthorizedError(f"issuer of {what} is not a CA (basic constraints)")
        # path_length bounds the intermediates below the issuer; ``depth`` of them are.
        if path_length is not None and depth > path_length:
            raise UnauthorizedError(f"issuer of {what} exceeds its path length")
        _check_issued(cert, issuer, what)
    _check_validity(path[-1], at, "trust anchor")
    return path[-1]


def _path_to_anchor(
    chain: Sequence[x509.Certificate], anchors: Sequence[x509.Certificate]
) -> list[x509.Certificate]:
    """The chain cut at the first configured anchor it contains, or extended by the anchor
    that issued its last certificate."""
    anchor_ders = {a.public_bytes(serialization.Encoding.DER) for a in anchors}
    for depth, cert in enumerate(chain):
        if depth > 0 and cert.public_bytes(serialization.Encoding.DER) in anchor_ders:
            return list(chain[: depth + 1])
    last = chain[-1]
    for anchor in anchors:  # several anchors may share a name: take the one that signed it
        if anchor.subject != last.issuer:
            continue
        try:
            last.verify_directly_issued_by(anchor)
        except (ValueError, TypeError, InvalidSignature):
            continue
        return [*chain, anchor]
    raise UnauthorizedError("certificate chain does not lead to a configured anchor")


# ---------------------------------------------------------------------- trust decision


@dataclass(frozen=True, slots=True)
class TrustConfig:
    """What this side accepts. ``trust_local`` defaults off: the driver turns it on for
    loopback and unix-socket listeners (PROFILE §4), where a local claim is reasonable."""

    trust_local: bool = False
    anchors: tuple[x509.Certificate, ...] = ()
    wall: Callable[[], datetime] = field(default=utc_now)


def evaluate_claim(hello: Hello, local: LocalNode, config: TrustConfig) -> TrustLevel:
    """Back the peer's trust claim or raise Unauthorized (401) / Forbidden (403)."""
    level = hello.trust_level
    if level is TrustLevel.LOCAL:
        if not config.trust_local:
            raise ForbiddenError("local trust is not accepted on this connection")
        return level
    if hello.cert_chain is None:
        raise UnauthorizedError(f"trust_level {level} needs a cert_chain")
    try:
        verify_chain(
            load_pem_chain(hello.cert_chain),
            config.anchors,
            public_key=hello.public_key,
            at=config.wall(),
            node_address=hello.node_address,
        )
    except (ValueError, TypeError, UnsupportedAlgorithm) as exc:
        # cryptography parses extensions and keys lazily: a hostile certificate can fail
        # anywhere in verification; all of it means the claim is not backed.
        raise UnauthorizedError(f"certificate chain cannot be verified: {exc}") from None
    # Federated means both directions: we must be presenting a chain of our own too.
    if level is TrustLevel.FEDERATED and (
        local.trust_level is not TrustLevel.FEDERATED or local.cert_chain is None
    ):
        raise ForbiddenError("federated trust needs certificates in both directions")
    return level
