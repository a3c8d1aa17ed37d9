"""Makes a throw-away test PKI with the openssl CLI: a CA (basicConstraints and keyUsage as strict
validators require) and one ECDSA P-256 server certificate per NAME=SAN argument (a year's validity
and revocation pointers, like a real certificate, so that scanners judge the server and not the test
certificate), keys mode 600.

Usage: test_pki.py DIR [NAME=SUBJECT_ALT_NAMES ...]
       (default: server=IP:127.0.0.1,DNS:localhost)
"""

import os
import subprocess
import sys
from pathlib import Path


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make(directory, certificates):
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    if not (d / "ca.pem").exists():
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                "ca.key", "-out", "ca.pem", "-days", "3650", "-subj", "/CN=band-edge test CA",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                cwd=d)
    for name, san in certificates.items():
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
        (d / f"{name}.cnf").write_text(
            f"subjectAltName={san}\nbasicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n"
            "extendedKeyUsage=serverAuth\nauthorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n"
            # Revocation pointers (never fetched: loopback, a closed port), as real certificates carry.
            "crlDistributionPoints=URI:http://127.0.0.1:9/test-ca.crl\n"
            "authorityInfoAccess=OCSP;URI:http://127.0.0.1:9/ocsp\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.pem", "-days", "365", "-extfile", f"{name}.cnf", cwd=d)
        os.chmod(d / f"{name}.key", 0o600)
    return d


if __name__ == "__main__":
    pairs = dict(arg.split("=", 1) for arg in sys.argv[2:]) or {"server": "IP:127.0.0.1,DNS:localhost"}
    make(sys.argv[1], pairs)
