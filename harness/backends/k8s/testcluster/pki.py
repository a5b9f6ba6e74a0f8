"""Certificates and kubeconfigs of the test cluster (Python `cryptography`, no openssl scripts).

One CA signs every serving and client certificate. Identities follow what the RBAC and Node
authorizers expect: `system:masters` for the admin and the apiserver's kubelet client,
`system:kube-controller-manager`, `system:kube-scheduler`, `system:kube-proxy`, and
`system:node:<node>` in group `system:nodes` for the kubelet. Service-account tokens are signed
with a separate RSA key pair. Everything is regenerated on every `up` (the state dir is wiped on
`down`), so no key outlives the cluster.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALIDITY = dt.timedelta(days=7)  # a test cluster lives for minutes


@dataclass(frozen=True)
class Identity:
    """Who a client certificate says it is."""

    file: str
    cn: str
    orgs: tuple[str, ...] = ()


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _name(cn: str, orgs: tuple[str, ...] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, cn)])


class Pki:
    """Writes ca.crt/ca.key, per-component certs, the service-account keys and kubeconfigs into `dir`."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.dir.chmod(0o700)
        now = dt.datetime.now(dt.UTC)
        self._not_before = now - dt.timedelta(minutes=5)
        self._not_after = now + VALIDITY
        self.ca_key = _key()
        subject = _name("autoscaler-bench-test-ca")
        self.ca_cert = (
            x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject)
            .public_key(self.ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._not_before).not_valid_after(self._not_after)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                         content_commitment=False, key_encipherment=False, data_encipherment=False,
                                         key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(self.ca_key, hashes.SHA256())
        )
        self._write("ca.crt", self.ca_cert.public_bytes(serialization.Encoding.PEM))
        self._write("ca.key", _pem_key(self.ca_key))

    def path(self, name: str) -> Path:
        return self.dir / name

    def _write(self, name: str, data: bytes) -> Path:
        p = self.dir / name
        p.write_bytes(data)
        p.chmod(0o600)
        return p

    def issue(self, file: str, cn: str, orgs: tuple[str, ...] = (), *, server: bool = False, client: bool = False,
              dns: tuple[str, ...] = (), ips: tuple[str, ...] = ()) -> tuple[Path, Path]:
        """Sign a certificate; returns (cert, key) paths named `<file>.crt` / `<file>.key`."""
        key = _key()
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server else []) + ([ExtendedKeyUsageOID.CLIENT_AUTH]
                                                                           if client else [])
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn, orgs)).issuer_name(self.ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(self._not_before).not_valid_after(self._not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        )
        sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(self.ca_key, hashes.SHA256())
        crt = self._write(f"{file}.crt", cert.public_bytes(serialization.Encoding.PEM))
        return crt, self._write(f"{file}.key", _pem_key(key))

    def service_account_keys(self) -> tuple[Path, Path]:
        """RSA pair that signs and verifies service-account tokens (sa.key, sa.pub)."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pub = key.public_key().public_bytes(serialization.Encoding.PEM,
                                            serialization.PublicFormat.SubjectPublicKeyInfo)
        return self._write("sa.key", _pem_key(key)), self._write("sa.pub", pub)

    def kubeconfig(self, name: str, server: str, identity: Identity) -> Path:
        """A kubeconfig that authenticates with a client certificate for `identity`."""
        crt, key = self.issue(identity.file, identity.cn, identity.orgs, client=True)
        return self.token_kubeconfig(name, server, user={"client-certificate": str(crt), "client-key": str(key)})

    def token_kubeconfig(self, name: str, server: str, user: dict[str, str]) -> Path:
        doc = {
            "apiVersion": "v1", "kind": "Config", "current-context": "bench",
            "clusters": [{"name": "bench", "cluster": {"server": server,
                                                        "certificate-authority": str(self.path("ca.crt"))}}],
            "users": [{"name": name, "user": user}],
            "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": name}}],
        }
        return self._write(f"{name}.kubeconfig", yaml.safe_dump(doc, sort_keys=False).encode())
