"""Certificates for the test control plane, generated per session with ``cryptography``.

One CA signs the API server's serving certificate and the client certificates;
the service-account key pair signs the tokens the API server issues. ECDSA
P-256 keys throughout: generated in milliseconds, accepted by every component.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=2)
"""Lifetime of every certificate: a test session lasts minutes, a day of slack either side."""


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, in memory."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class KeyPair:
    """PEM files of one certificate and its key."""

    cert: Path
    key: Path


def _name(common_name: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey
) -> x509.CertificateBuilder:
    now = dt.datetime.now(dt.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - VALIDITY / 2)
        .not_valid_after(now + VALIDITY)
    )


def new_key() -> ec.EllipticCurvePrivateKey:
    """A fresh P-256 private key."""
    return ec.generate_private_key(ec.SECP256R1())


def make_ca(common_name: str = "arkgpu-e2e-ca") -> Issued:
    """A self-signed certificate authority."""
    key = new_key()
    cert = (
        _builder(_name(common_name), _name(common_name), key)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return Issued(cert, key)


def issue(
    ca: Issued,
    common_name: str,
    *,
    orgs: tuple[str, ...] = (),
    dns: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
) -> Issued:
    """A leaf certificate signed by ``ca``: a server one when it names hosts, else a client one.

    The API server maps a client certificate's CN to the user name and its O
    fields to groups (``system:masters`` bypasses authorization).
    """
    key = new_key()
    server = bool(dns or ips)
    usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
    builder = (
        _builder(_name(common_name, orgs), ca.cert.subject, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    )
    if server:
        names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        names += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return Issued(builder.sign(ca.key, hashes.SHA256()), key)


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """The private key as unencrypted PKCS#8 PEM."""
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def write(issued: Issued, directory: Path, stem: str) -> KeyPair:
    """``<stem>.crt`` and ``<stem>.key`` in ``directory`` (the key readable by its owner only)."""
    pair = KeyPair(directory / f"{stem}.crt", directory / f"{stem}.key")
    pair.cert.write_bytes(issued.cert.public_bytes(serialization.Encoding.PEM))
    pair.key.touch(mode=0o600)
    pair.key.write_bytes(key_pem(issued.key))
    return pair


def write_service_account_keys(directory: Path) -> KeyPair:
    """The token-signing key pair: ``sa.pub`` (public, in ``cert``) and ``sa.key``."""
    key = new_key()
    pair = KeyPair(directory / "sa.pub", directory / "sa.key")
    pair.cert.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    pair.key.touch(mode=0o600)
    pair.key.write_bytes(key_pem(key))
    return pair


def apiserver_names(
    pod_address: str, service_range: str
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The API server certificate's DNS names and IP addresses: loopback's; with a
    ``pod_address`` (the node's, where pods reach it) also that address, the ``kubernetes``
    Service's IP (the first of ``service_range``) and its in-cluster names."""
    hosts = ("localhost", "kubernetes", "kubernetes.default")
    if not pod_address:
        return hosts, ("127.0.0.1",)
    service_ip = str(ipaddress.ip_network(service_range)[1])
    in_cluster = ("kubernetes.default.svc", "kubernetes.default.svc.cluster.local")
    return hosts + in_cluster, ("127.0.0.1", pod_address, service_ip)
