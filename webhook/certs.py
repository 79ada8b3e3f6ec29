"""The webhook's own CA and serving certificate: what to issue, and when to renew.

Pure functions over PEM bytes; ``webhook.tls`` stores the result in a Secret and
writes the CA into the webhook configurations. Modelled on Kueue's internal
certificate management (a self-signed CA, a serving certificate for the Service's
DNS names, renewal well before expiry), with one addition: a renewed CA does not
replace the old one at once. The caBundle carries both until the old CA expires,
so a replica still serving a certificate from the old CA keeps being trusted
while it reloads.

Renewal rule: a certificate (CA or serving) is renewed once less than a third of
its lifetime is left. The serving certificate never outlives its CA.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CRT, CA_KEY, TLS_CRT, TLS_KEY, PREVIOUS_CA_CRT = (
    "ca.crt",
    "ca.key",
    "tls.crt",
    "tls.key",
    "ca-previous.crt",
)
"""Keys of the Secret (tls.crt/tls.key as in a kubernetes.io/tls Secret)."""

BACKDATE = dt.timedelta(minutes=1)
"""Certificates start this much in the past: tolerates small clock skew."""


@dataclass(frozen=True, slots=True)
class Bundle:
    """Everything in the Secret, PEM-encoded ("" when absent)."""

    ca_crt: bytes = b""
    ca_key: bytes = b""
    tls_crt: bytes = b""
    tls_key: bytes = b""
    previous_ca_crt: bytes = b""

    @staticmethod
    def from_data(data: dict[str, bytes]) -> Bundle:
        return Bundle(
            data.get(CA_CRT, b""),
            data.get(CA_KEY, b""),
            data.get(TLS_CRT, b""),
            data.get(TLS_KEY, b""),
            data.get(PREVIOUS_CA_CRT, b""),
        )

    def to_data(self) -> dict[str, bytes]:
        out = {CA_CRT: self.ca_crt, CA_KEY: self.ca_key, TLS_CRT: self.tls_crt}
        out[TLS_KEY] = self.tls_key
        if self.previous_ca_crt:
            out[PREVIOUS_CA_CRT] = self.previous_ca_crt
        return out

    @property
    def ca_bundle(self) -> bytes:
        """What the API server must trust: the current CA, and the previous one while valid."""
        return self.ca_crt + self.previous_ca_crt


def dns_names(service: str, namespace: str) -> list[str]:
    """Names the API server may use for a Service-addressed webhook."""
    return [
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
        f"{service}.{namespace}",
        service,
    ]


def _load(pem: bytes) -> x509.Certificate | None:
    if not pem:
        return None
    try:
        return x509.load_pem_x509_certificate(pem)
    except ValueError:
        return None


def _due(cert: x509.Certificate | None, now: dt.datetime) -> bool:
    """Missing, or less than a third of its lifetime left."""
    if cert is None:
        return True
    # the lifetime we asked for: issue time (not_valid_before + BACKDATE) to expiry
    issued, end = cert.not_valid_before_utc + BACKDATE, cert.not_valid_after_utc
    return end - now < (end - issued) / 3


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def issue_ca(service: str, validity: dt.timedelta, now: dt.datetime) -> tuple[bytes, bytes]:
    """A new self-signed CA: (certificate PEM, key PEM)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = _name(f"{service}-ca@{int(now.timestamp())}")
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def issue_serving(
    ca_pem: bytes, ca_key_pem: bytes, names: list[str], validity: dt.timedelta, now: dt.datetime
) -> tuple[bytes, bytes]:
    """A serving certificate for ``names`` signed by the CA: (certificate PEM, key PEM)."""
    ca = x509.load_pem_x509_certificate(ca_pem)
    ca_key = serialization.load_pem_private_key(ca_key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key in the Secret is not an EC key")
    key = ec.generate_private_key(ec.SECP256R1())
    end = min(now + validity, ca.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(names[0]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - BACKDATE)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)


def _serves(cert: x509.Certificate, ca: x509.Certificate, names: list[str]) -> bool:
    """Issued by ``ca`` (by name) for exactly ``names``."""
    if cert.issuer != ca.subject:
        return False
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    return sorted(san.get_values_for_type(x509.DNSName)) == sorted(names)


def plan(
    current: Bundle,
    names: list[str],
    ca_validity: dt.timedelta,
    cert_validity: dt.timedelta,
    now: dt.datetime,
    service: str,
) -> Bundle | None:
    """The Bundle to store, or None when ``current`` is good as it is."""
    ca = _load(current.ca_crt)
    new = current
    if ca is None or not current.ca_key or _due(ca, now):
        ca_pem, ca_key = issue_ca(service, ca_validity, now)
        keep = ca is not None and ca.not_valid_after_utc > now
        new = Bundle(ca_pem, ca_key, b"", b"", current.ca_crt if keep else b"")
        ca = x509.load_pem_x509_certificate(ca_pem)
    previous = _load(new.previous_ca_crt)
    if new.previous_ca_crt and (previous is None or previous.not_valid_after_utc <= now):
        new = replace(new, previous_ca_crt=b"")
    leaf = _load(new.tls_crt)
    if leaf is None or not new.tls_key or _due(leaf, now) or not _serves(leaf, ca, names):
        crt, key = issue_serving(new.ca_crt, new.ca_key, names, cert_validity, now)
        new = replace(new, tls_crt=crt, tls_key=key)
    return None if new == current else new


def serial_of(pem: bytes) -> int | None:
    cert = _load(pem)
    return None if cert is None else cert.serial_number
