"""The certificates of a TLS-only test server, made with `openssl`."""

from __future__ import annotations

import os
import subprocess

# A certificate of the server's own CA, valid for the addresses clients dial.
_SERVER_EXTENSIONS = (
    "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n"
    "extendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n"
)


def make_certificates(dir: str) -> None:
    """Writes into `dir` a CA (ca.crt, ca.key) and a server certificate for
    127.0.0.1 and localhost that it signed (server.crt, server.key)."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    with open(os.path.join(dir, "server.ext"), "w") as f:
        f.write(_SERVER_EXTENSIONS)
    for args in (
        ["req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=rlock test CA", "-days", "2"],
        ["req", *ec, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"],
        ["x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "server.crt", "-days", "2", "-extfile", "server.ext"],
    ):
        subprocess.run(["openssl", *args], cwd=dir, check=True, capture_output=True)
