"""A per-lab certificate authority and serving certificate for the simulator's HTTPS mode.

Generated with ``cryptography`` (already installed as a moto dependency): an EC P-256 CA valid
for a day and a leaf for ``127.0.0.1``/``localhost``. The kubeconfig embeds the CA so kubectl
and the Python client verify the server exactly as they would a real cluster.
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


@dataclass(frozen=True)
class ServingCerts:
    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    def write(self, directory: Path) -> tuple[Path, Path, Path]:
        directory.mkdir(parents=True, exist_ok=True)
        paths = (directory / "ca.crt", directory / "apiserver.crt", directory / "apiserver.key")
        for path, data in zip(paths, (self.ca_pem, self.cert_pem, self.key_pem), strict=True):
            path.write_bytes(data)
        paths[2].chmod(0o600)
        return paths


def make_certs(hosts: tuple[str, ...] = ("127.0.0.1", "localhost")) -> ServingCerts:
    now = dt.datetime.now(dt.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "ccm-lab-kube-ca")])
    ca = _ca_certificate(ca_key, ca_name, now)
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = _serving_certificate(key, ca_key, ca_name, hosts, now)
    return ServingCerts(
        ca_pem=ca.public_bytes(serialization.Encoding.PEM),
        cert_pem=leaf.public_bytes(serialization.Encoding.PEM),
        key_pem=key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )


def _ca_certificate(
    ca_key: ec.EllipticCurvePrivateKey, ca_name: x509.Name, now: dt.datetime
) -> x509.Certificate:
    """A self-signed CA for one day (five minutes' clock skew allowed)."""
    return (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
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
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )


def _serving_certificate(
    key: ec.EllipticCurvePrivateKey,
    ca_key: ec.EllipticCurvePrivateKey,
    ca_name: x509.Name,
    hosts: tuple[str, ...],
    now: dt.datetime,
) -> x509.Certificate:
    """The apiserver's serving certificate for ``hosts`` (IP or DNS names), signed by the CA."""
    sans: list[x509.GeneralName] = []
    for h in hosts:
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            sans.append(x509.DNSName(h))
    return (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kube-apiserver")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
