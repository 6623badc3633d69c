"""Test PKI for the mTLS tests (``auth.mode = cert``), made with the openssl command (``cryptography`` is not
installed): CAs, a server certificate for 127.0.0.1 and client certificates with the SANs, OUs and validity
the tests need. ``openssl ca`` is used for every leaf because it is the only OpenSSL 3.0 command that sets
an arbitrary validity window (an already expired client certificate).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

_CA_CONFIG = """\
[ca]
default_ca = test_ca
[test_ca]
dir = {dir}
database = $dir/index.txt
new_certs_dir = $dir/issued
serial = $dir/serial
certificate = $dir/ca.pem
private_key = $dir/ca.key
default_md = sha256
policy = anything
unique_subject = no
copy_extensions = none
[anything]
commonName = optional
emailAddress = optional
organizationName = optional
organizationalUnitName = optional
countryName = optional
"""


@dataclass(frozen=True)
class Pair:
    cert: str
    key: str

    @property
    def both(self) -> tuple[str, str]:
        """``(cert, key)`` as ``requests`` takes it in ``cert=``."""
        return self.cert, self.key


def _openssl(*args: str) -> None:
    assert shutil.which("openssl"), "the mTLS tests need the openssl command"
    proc = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, f"openssl {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"


def _key(path: Path) -> None:
    _openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-out", str(path))


class TestCA:
    """A CA in ``directory`` that signs leaves; ``ca.pem`` is its certificate (the bundle for auth.cert.ca)."""

    __test__ = False   # not a pytest class

    def __init__(self, directory: Path, name: str) -> None:
        self.dir = directory
        (directory / "issued").mkdir(parents=True)
        (directory / "index.txt").write_text("")
        (directory / "serial").write_text("1000\n")
        (directory / "ca.cnf").write_text(_CA_CONFIG.format(dir=directory))
        self.cert = str(directory / "ca.pem")
        _key(directory / "ca.key")
        _openssl("req", "-x509", "-new", "-key", str(directory / "ca.key"), "-out", self.cert, "-days", "3",
                 "-subj", f"/O=Shoal tests/CN={name}",
                 "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign")

    def issue(self, name: str, subject: str, *, san: str | None = None, server: bool = False,
              start: str | None = None, end: str | None = None) -> Pair:
        """A leaf signed by this CA. ``subject`` as openssl writes it (``/OU=a/OU=b/CN=x``), ``san`` as an
        openssl subjectAltName value (``URI:spiffe://…,email:…``); ``start``/``end`` as ``YYYYMMDDHHMMSSZ``
        (default: valid from an hour ago for two days)."""
        key, csr, cert = (self.dir / f"{name}{suffix}" for suffix in (".key", ".csr", ".pem"))
        _key(key)
        _openssl("req", "-new", "-key", str(key), "-out", str(csr), "-subj", subject)
        usage = "serverAuth" if server else "clientAuth"
        lines = ["[leaf]", "basicConstraints = critical,CA:FALSE", "keyUsage = critical,digitalSignature",
                 f"extendedKeyUsage = {usage}"]
        if san:
            lines.append(f"subjectAltName = {san}")
        extensions = self.dir / f"{name}.ext"
        extensions.write_text("\n".join(lines) + "\n")
        window = ["-startdate", start] if start else []
        window += ["-enddate", end] if end else ["-days", "2"]
        _openssl("ca", "-batch", "-config", str(self.dir / "ca.cnf"), "-in", str(csr), "-out", str(cert),
                 "-notext", "-preserveDN", "-extfile", str(extensions), "-extensions", "leaf", *window)
        return Pair(str(cert), str(key))
