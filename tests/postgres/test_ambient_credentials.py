"""A source's connection logs in with what its template names, never the process's defaults.

libpq fills every option a connection leaves unset from the process: ``PGPASSWORD``, the
password file (``PGPASSFILE`` or ``~/.pgpass``), a service file's values (``PGSERVICE``), the
client certificate (``PGSSLCERT``/``PGSSLKEY`` or ``~/.postgresql/postgresql.crt``) and
``PGOPTIONS``. These belong to the whole process, and docs/secrets.md gives a tenant only the
secrets its ``ReferencePolicy`` names — by default none — so a template that names no password
(or no certificate) must log in with none.

The server here is a fake on an allow-listed port (real libpq through psycopg on the client
side): it records the startup parameters, the client certificate presented during TLS, and the
password libpq answers to a cleartext-password request; then it refuses the login. That the
server's trust authentication still works without a password is covered by every live test in
this package (their templates carry no password).
"""

from __future__ import annotations

import asyncio
import datetime
import os
import socket
import ssl
import struct
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from esra.core import SourceHealth
from esra.core.codes import ProviderErrorCode
from esra.core.exceptions import ProviderError
from esra.core.secrets import ReferencePolicy, ReferenceSecretResolver
from esra.core.testing import InMemorySecretStore, StaticHostAllowlist
from esra.postgres import (
    PRIVATE_FILE_OPTIONS,
    PUBLIC_FILE_OPTIONS,
    SCHEMES,
    PostgresProvider,
    connect_kwargs,
)
from esra.sql import ConnectionTarget, resolve_connection

_SSL_REQUEST = 80877103
_GSSENC_REQUEST = 80877104
_AMBIENT_VARIABLES = (
    "PGPASSWORD",
    "PGPASSFILE",
    "PGSERVICE",
    "PGSERVICEFILE",
    "PGSYSCONFDIR",
    "PGSSLCERT",
    "PGSSLKEY",
    "PGSSLROOTCERT",
    "PGSSLMODE",
    "PGOPTIONS",
    "PGUSER",
)


_LIBPQ_KEYWORDS = frozenset(
    option.keyword.decode() for option in psycopg.pq.Conninfo.get_defaults() if option.keyword
)


class _LoginTrap:
    """Speaks just enough of the protocol to see what a client logs in with.

    ``tls``: answer an SSLRequest with TLS, asking for (not requiring) a client certificate
    signed by ``client_ca``; otherwise refuse TLS ('N').
    """

    def __init__(self, tls: ssl.SSLContext | None = None, *, authentication: int = 3) -> None:
        self._tls = tls
        self._authentication = authentication  # 3: cleartext password; 7: GSSAPI
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port: int = self.sock.getsockname()[1]
        self.passwords: list[str] = []
        self.startups: list[dict[str, str]] = []
        self.client_certificates: list[str] = []  # the subject CN presented, "" for none
        threading.Thread(target=self._serve, daemon=True).start()

    @staticmethod
    def _recv(conn: socket.socket, n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = conn.recv(n - len(data))
            if not chunk:
                raise ConnectionError
            data += chunk
        return data

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            opened = [conn]  # and its TLS wrapper, when there is one
            try:
                self._login(opened)
            except (ConnectionError, OSError, struct.error, ssl.SSLError):
                pass
            finally:
                for each in reversed(opened):
                    each.close()

    def _login(self, opened: list[socket.socket]) -> None:
        conn = opened[0]
        body = b""
        while True:
            (length,) = struct.unpack("!i", self._recv(conn, 4))
            body = self._recv(conn, length - 4)
            (code,) = struct.unpack("!i", body[:4])
            if code == _SSL_REQUEST and self._tls is not None:
                conn.sendall(b"S")
                tls = self._tls.wrap_socket(conn, server_side=True)
                opened.append(tls)
                conn = tls
                subject: Any = (tls.getpeercert() or {}).get("subject", ())
                names = [value for rdn in subject for key, value in rdn if key == "commonName"]
                self.client_certificates.append(str(names[0]) if names else "")
                continue
            if code in (_SSL_REQUEST, _GSSENC_REQUEST):
                conn.sendall(b"N")
                continue
            break
        parts = body[4:].split(b"\x00")
        self.startups.append(
            {
                parts[i].decode(): parts[i + 1].decode()
                for i in range(0, len(parts) - 1, 2)
                if parts[i]
            }
        )
        conn.sendall(b"R" + struct.pack("!ii", 8, self._authentication))
        kind = self._recv(conn, 1)
        (length,) = struct.unpack("!i", self._recv(conn, 4))
        body = self._recv(conn, length - 4)
        if kind == b"p":
            self.passwords.append(body.rstrip(b"\x00").decode())
        error = b"SFATAL\x00C28P01\x00Mno\x00\x00"
        conn.sendall(b"E" + struct.pack("!i", len(error) + 4) + error)

    def close(self) -> None:
        self.sock.close()


def _certificate(directory: Path, name: str) -> tuple[Path, Path]:
    """A self-signed certificate for ``name`` and its unencrypted key, as PEM files (0600)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / f"{name}.crt", directory / f"{name}.key"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return cert_path, key_path


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No libpq variable from the machine, and a home directory of the test's own."""
    for name in _AMBIENT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))


@pytest.fixture
def trap() -> Iterator[_LoginTrap]:
    server = _LoginTrap()
    yield server
    server.close()


@pytest.fixture
def certificates(tmp_path: Path) -> dict[str, tuple[Path, Path]]:
    directory = tmp_path / "pki"
    directory.mkdir()
    return {name: _certificate(directory, name) for name in ("server", "process", "tenant")}


@pytest.fixture
def tls_trap(certificates: dict[str, tuple[Path, Path]]) -> Iterator[_LoginTrap]:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*certificates["server"])
    context.verify_mode = ssl.CERT_OPTIONAL
    for name in ("process", "tenant"):  # trust both, so either would be accepted if sent
        context.load_verify_locations(cafile=certificates[name][0])
    server = _LoginTrap(context)
    yield server
    server.close()


def _provider(port: int, template: str, *, secrets: object | None = None) -> PostgresProvider:
    # Another tenant may reference env:PGPASSWORD; tenant B may reference nothing (the default).
    resolver = ReferenceSecretResolver(
        {"tenant-a": ReferencePolicy(env_names=("PGPASSWORD",))},
        environ={"PGPASSWORD": "tenant-a-db-password"},
    )
    return PostgresProvider(
        tenant_id="tenant-b",
        connection=template.format(port=port),
        secrets=secrets or resolver,  # type: ignore[arg-type]
        allowlist=StaticHostAllowlist([("tenant-b", "127.0.0.1", port)]),
        connect_timeout_s=3,
    )


async def _log_in(provider: PostgresProvider) -> None:
    try:
        await provider.health()  # the login is refused: only what was sent matters
    finally:
        await provider.close()


_NO_PASSWORD = "postgresql://reader@127.0.0.1:{port}/sales?sslmode=disable"


async def test_the_environments_password_is_not_sent(
    trap: _LoginTrap, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGPASSWORD", "tenant-a-db-password")
    await _log_in(_provider(trap.port, _NO_PASSWORD))
    assert len(trap.startups) >= 1  # it did reach the server
    assert trap.passwords == []


async def test_the_password_file_named_by_pgpassfile_is_not_read(
    trap: _LoginTrap, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"127.0.0.1:{trap.port}:*:reader:owner-password-from-pgpass\n")
    passfile.chmod(0o600)
    monkeypatch.setenv("PGPASSFILE", str(passfile))
    await _log_in(_provider(trap.port, _NO_PASSWORD))
    assert len(trap.startups) >= 1
    assert trap.passwords == []


async def test_the_home_directorys_pgpass_is_not_read(trap: _LoginTrap, tmp_path: Path) -> None:
    passfile = tmp_path / "home" / ".pgpass"
    passfile.write_text("*:*:*:*:owner-password-from-home\n")
    passfile.chmod(0o600)
    await _log_in(_provider(trap.port, _NO_PASSWORD))
    assert len(trap.startups) >= 1
    assert trap.passwords == []


async def test_a_service_files_password_and_options_are_not_used(
    trap: _LoginTrap, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    service_file = tmp_path / "pg_service.conf"
    service_file.write_text(
        "[ambient]\npassword=owner-password-from-service\n"
        "options=-c default_transaction_read_only=off\n"
    )
    monkeypatch.setenv("PGSERVICEFILE", str(service_file))
    monkeypatch.setenv("PGSERVICE", "ambient")
    await _log_in(_provider(trap.port, _NO_PASSWORD))
    assert len(trap.startups) >= 1
    assert trap.passwords == []
    assert all("options" not in startup for startup in trap.startups)


async def test_pgoptions_are_not_sent(trap: _LoginTrap, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGOPTIONS", "-c default_transaction_read_only=off")
    await _log_in(_provider(trap.port, _NO_PASSWORD))
    assert len(trap.startups) >= 1
    assert all("options" not in startup for startup in trap.startups)


async def test_the_templates_own_password_is_sent(trap: _LoginTrap) -> None:
    """The control: what the template names still logs in."""
    secrets = InMemorySecretStore({("tenant-b", "pg-pw"): "tenant-b-password"})
    template = "postgresql://reader:${{secret:pg-pw}}@127.0.0.1:{port}/sales?sslmode=disable"
    await _log_in(_provider(trap.port, template, secrets=secrets))
    assert trap.passwords
    assert set(trap.passwords) == {"tenant-b-password"}


async def test_a_reference_another_tenants_policy_allows_sends_nothing(trap: _LoginTrap) -> None:
    """The control the ambient fallback bypassed: naming the variable is refused."""
    template = "postgresql://reader:${{secret:env:PGPASSWORD}}@127.0.0.1:{port}/sales"
    await _log_in(_provider(trap.port, template))
    assert trap.startups == []
    assert trap.passwords == []


# A bound for a connect that should end at once: reached only when libpq blocks.
_BLOCKED_S = 30.0
_TLS_NO_CERTIFICATE = "postgresql://reader@127.0.0.1:{port}/sales?sslmode=require"


async def test_the_environments_client_certificate_is_not_presented(
    tls_trap: _LoginTrap,
    monkeypatch: pytest.MonkeyPatch,
    certificates: dict[str, tuple[Path, Path]],
) -> None:
    cert, key = certificates["process"]
    monkeypatch.setenv("PGSSLCERT", str(cert))
    monkeypatch.setenv("PGSSLKEY", str(key))
    await _log_in(_provider(tls_trap.port, _TLS_NO_CERTIFICATE))
    assert len(tls_trap.client_certificates) >= 1  # TLS was negotiated
    assert set(tls_trap.client_certificates) == {""}


async def test_the_home_directorys_client_certificate_is_not_presented(
    tls_trap: _LoginTrap, tmp_path: Path, certificates: dict[str, tuple[Path, Path]]
) -> None:
    cert, key = certificates["process"]
    directory = tmp_path / "home" / ".postgresql"
    directory.mkdir()
    (directory / "postgresql.crt").write_bytes(cert.read_bytes())
    (directory / "postgresql.key").write_bytes(key.read_bytes())
    (directory / "postgresql.key").chmod(0o600)
    await _log_in(_provider(tls_trap.port, _TLS_NO_CERTIFICATE))
    assert len(tls_trap.client_certificates) >= 1
    assert set(tls_trap.client_certificates) == {""}


def _key_policy(directory: Path, *, private_files_only: bool = True) -> ReferenceSecretResolver:
    """Tenant B may read secret files in ``directory``; nothing else."""
    return ReferenceSecretResolver(
        {
            "tenant-b": ReferencePolicy(
                directories=(str(directory),), private_files_only=private_files_only
            )
        }
    )


async def test_the_templates_own_client_certificate_is_presented(
    tls_trap: _LoginTrap,
    monkeypatch: pytest.MonkeyPatch,
    certificates: dict[str, tuple[Path, Path]],
) -> None:
    """The control: a certificate the template names, with a key in a directory the
    tenant's secret policy allows, is still used (and the trap sees it)."""
    process_cert, process_key = certificates["process"]
    monkeypatch.setenv("PGSSLCERT", str(process_cert))
    monkeypatch.setenv("PGSSLKEY", str(process_key))
    cert, key = certificates["tenant"]
    template = _TLS_NO_CERTIFICATE + f"&sslcert={cert}&sslkey={key}"
    await _log_in(_provider(tls_trap.port, template, secrets=_key_policy(key.parent)))
    assert len(tls_trap.client_certificates) >= 1
    assert set(tls_trap.client_certificates) == {"tenant"}


async def test_a_client_key_outside_the_tenants_secret_directories_is_not_presented(
    tls_trap: _LoginTrap, tmp_path: Path, certificates: dict[str, tuple[Path, Path]]
) -> None:
    """Tenant A's client key lies on the same host; tenant B's template names it.

    The key is a credential like a password, and tenant B's policy allows only its own
    directory: the connection is refused before a socket opens, as for a password reference
    the policy does not allow (``SECRET_UNRESOLVED``, checked at the end).
    """
    cert, key = certificates["process"]  # tenant A's, say: outside tenant B's directory
    own_directory = tmp_path / "tenant-b-secrets"
    own_directory.mkdir()
    provider = _provider(
        tls_trap.port,
        _TLS_NO_CERTIFICATE + f"&sslcert={cert}&sslkey={key}",
        secrets=_key_policy(own_directory),
    )
    await _log_in(provider)
    assert tls_trap.startups == []
    assert tls_trap.client_certificates == []
    with pytest.raises(ProviderError) as raised:
        await resolve_connection(
            _TLS_NO_CERTIFICATE.format(port=tls_trap.port) + f"&sslcert={cert}&sslkey={key}",
            tenant_id="tenant-b",
            secrets=_key_policy(own_directory),
            allowlist=StaticHostAllowlist([("tenant-b", "127.0.0.1", tls_trap.port)]),
            schemes=SCHEMES,
            private_file_options=PRIVATE_FILE_OPTIONS,
        )
    assert raised.value.code is ProviderErrorCode.SECRET_UNRESOLVED


async def test_a_client_key_reached_through_a_link_in_the_tenants_directory_is_refused(
    tls_trap: _LoginTrap, tmp_path: Path, certificates: dict[str, tuple[Path, Path]]
) -> None:
    """A symbolic link inside the allowed directory is judged by where it leads."""
    cert, key = certificates["process"]
    own_directory = tmp_path / "tenant-b-secrets"
    own_directory.mkdir()
    (own_directory / "client.key").symlink_to(key)
    template = _TLS_NO_CERTIFICATE + f"&sslcert={cert}&sslkey={own_directory / 'client.key'}"
    provider = _provider(tls_trap.port, template, secrets=_key_policy(own_directory))
    await _log_in(provider)
    assert tls_trap.client_certificates == []


async def test_a_readable_client_key_is_refused_where_the_policy_wants_private_files(
    tls_trap: _LoginTrap, certificates: dict[str, tuple[Path, Path]]
) -> None:
    """libpq refuses a group-readable key by itself, so the trap alone cannot tell whose
    check refused it: the resolution must already, as for any ``file:`` secret."""
    cert, key = certificates["tenant"]
    key.chmod(0o644)
    template = _TLS_NO_CERTIFICATE + f"&sslcert={cert}&sslkey={key}"
    provider = _provider(tls_trap.port, template, secrets=_key_policy(key.parent))
    await _log_in(provider)
    assert tls_trap.startups == []
    with pytest.raises(ProviderError) as raised:
        await resolve_connection(
            template.format(port=tls_trap.port),
            tenant_id="tenant-b",
            secrets=_key_policy(key.parent),
            allowlist=StaticHostAllowlist([("tenant-b", "127.0.0.1", tls_trap.port)]),
            schemes=SCHEMES,
            private_file_options=PRIVATE_FILE_OPTIONS,
        )
    assert raised.value.code is ProviderErrorCode.SECRET_UNRESOLVED


async def test_a_client_key_named_through_a_secret_reference_is_judged_as_resolved(
    tls_trap: _LoginTrap, certificates: dict[str, tuple[Path, Path]], tmp_path: Path
) -> None:
    """A path that arrives through a stored secret is checked after substitution."""
    cert, key = certificates["process"]
    own_directory = tmp_path / "tenant-b-secrets"
    own_directory.mkdir()

    class _Secrets:
        async def resolve(self, tenant_id: str, reference: str) -> str:
            if reference == "key-path":
                return str(key)
            return await _key_policy(own_directory).resolve(tenant_id, reference)

    template = _TLS_NO_CERTIFICATE + f"&sslcert={cert}&sslkey=${{{{secret:key-path}}}}"
    provider = _provider(tls_trap.port, template, secrets=_Secrets())
    await _log_in(provider)
    assert tls_trap.client_certificates == []


def _target(*options: tuple[str, str], password: str = "") -> ConnectionTarget:
    return ConnectionTarget(
        host="db.internal",
        port=5432,
        database="sales",
        user="reader",
        password=password,
        options=options,
    )


def test_every_ambient_default_is_set_explicitly() -> None:
    kwargs = connect_kwargs(_target(), connect_timeout_s=5)
    assert kwargs["password"] == ""
    assert kwargs["options"] == ""
    # Paths no file can ever exist at: libpq goes on without a password file or certificate.
    for name in ("passfile", "sslcert"):
        assert not Path(kwargs[name]).exists()
        assert Path(kwargs[name]).parent.exists()
        assert not Path(kwargs[name]).parent.is_dir()


def test_an_empty_certificate_option_is_no_certificate() -> None:
    """libpq reads ``sslcert=`` as "the default file", ~/.postgresql/postgresql.crt."""
    kwargs = connect_kwargs(_target(("sslcert", ""), ("sslkey", "")), connect_timeout_s=5)
    assert kwargs["sslcert"] == connect_kwargs(_target(), connect_timeout_s=5)["sslcert"]


async def test_an_empty_certificate_option_presents_none(
    tls_trap: _LoginTrap, tmp_path: Path, certificates: dict[str, tuple[Path, Path]]
) -> None:
    cert, key = certificates["process"]
    directory = tmp_path / "home" / ".postgresql"
    directory.mkdir()
    (directory / "postgresql.crt").write_bytes(cert.read_bytes())
    template = _TLS_NO_CERTIFICATE + f"&sslcert=&sslkey={key}"
    await _log_in(_provider(tls_trap.port, template, secrets=_key_policy(key.parent)))
    assert len(tls_trap.client_certificates) >= 1
    assert set(tls_trap.client_certificates) == {""}


def test_a_templates_certificate_and_password_are_kept(tmp_path: Path) -> None:
    certificate = tmp_path / "c.crt"
    certificate.write_text("a certificate")
    kwargs = connect_kwargs(
        _target(("sslcert", str(certificate)), ("sslkey", "/etc/esra/c.key"), password="pw"),
        connect_timeout_s=5,
    )
    assert (kwargs["password"], kwargs["sslcert"], kwargs["sslkey"]) == (
        "pw",
        str(certificate),
        "/etc/esra/c.key",
    )


@pytest.mark.parametrize("name", sorted(PUBLIC_FILE_OPTIONS))
def test_a_certificate_option_must_name_a_regular_file(name: str, tmp_path: Path) -> None:
    """libpq reads the path it is given to the end: a FIFO (or ``/dev/stdin``, or one of the
    process's pipes under ``/proc/self/fd``) would block it for ever, a directory or a
    missing file can never connect. A regular file is kept, and so is ``system``."""
    fifo, directory, regular = tmp_path / "fifo", tmp_path / "directory", tmp_path / "c.pem"
    os.mkfifo(fifo)
    directory.mkdir()
    regular.write_text("a certificate")
    extra = (("sslkey", "/etc/esra/c.key"),) if name == "sslcert" else ()
    for refused in (fifo, directory, tmp_path / "missing.pem", "/dev/stdin", "a\x00b"):
        with pytest.raises(ProviderError) as raised:
            connect_kwargs(_target((name, str(refused)), *extra), connect_timeout_s=5)
        assert raised.value.code is ProviderErrorCode.CONNECTION_TEMPLATE_INVALID, refused
    kept = connect_kwargs(_target((name, str(regular)), *extra), connect_timeout_s=5)
    assert kept[name] == str(regular)
    if name == "sslrootcert":
        system = connect_kwargs(_target((name, "system")), connect_timeout_s=5)
        assert system[name] == "system"


def test_a_fifo_named_as_the_root_certificate_never_blocks_the_host(
    tls_trap: _LoginTrap, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Against a server that accepts TLS, libpq loads the root certificate inside the event
    loop's connect: a FIFO there blocked the whole loop for ever (reproduced before the
    check). The connection is refused as an invalid template instead, at once."""
    fifo = tmp_path / "root.crt"
    os.mkfifo(fifo)
    template = f"postgresql://reader@127.0.0.1:{{port}}/sales?sslmode=verify-ca&sslrootcert={fifo}"
    answers: list[object] = []

    async def health() -> object:
        provider = _provider(tls_trap.port, template)
        try:
            return await provider.health()
        finally:
            await provider.close()

    thread = threading.Thread(target=lambda: answers.append(asyncio.run(health())), daemon=True)
    thread.start()
    thread.join(_BLOCKED_S)
    blocked = thread.is_alive()
    if blocked:
        with fifo.open("wb"):  # an end of file for the blocked reader, so the thread ends
            pass
        thread.join(_BLOCKED_S)
    assert not blocked, "libpq blocked reading the FIFO"
    assert answers == [SourceHealth.UNAVAILABLE]
    assert "CONNECTION_TEMPLATE_INVALID" in caplog.text


def test_kerberos_is_switched_off() -> None:
    """GSSAPI would encrypt and log in with the process's Kerberos ticket."""
    kwargs = connect_kwargs(_target(), connect_timeout_s=5)
    assert kwargs["gssencmode"] == "disable"
    if "require_auth" in _LIBPQ_KEYWORDS:  # libpq 16 and later: this machine's, 18
        assert kwargs["require_auth"] == "!gss,!sspi"
    assert connect_kwargs(_target(("gssencmode", "disable")), connect_timeout_s=5) == kwargs
    for mode in ("prefer", "require", "allow", ""):
        with pytest.raises(ProviderError) as raised:
            connect_kwargs(_target(("gssencmode", mode)), connect_timeout_s=5)
        assert raised.value.code is ProviderErrorCode.CONNECTION_TEMPLATE_INVALID


@pytest.mark.skipif(
    "require_auth" not in _LIBPQ_KEYWORDS, reason="libpq before 16 has no require_auth"
)
async def test_a_server_asking_for_kerberos_gets_no_answer() -> None:
    """libpq refuses a GSSAPI request itself, before it would look for a ticket."""
    trap = _LoginTrap(authentication=7)  # AuthenticationGSS
    try:
        kwargs = connect_kwargs(
            ConnectionTarget(
                host="127.0.0.1", port=trap.port, database="sales", user="reader", password=""
            ),
            connect_timeout_s=3,
        )
        kwargs["sslmode"] = "disable"
        with pytest.raises(psycopg.OperationalError, match="authentication method requirement"):
            await psycopg.AsyncConnection.connect(**kwargs)
        assert len(trap.startups) == 1
    finally:
        trap.close()


def test_a_certificate_without_its_key_is_refused() -> None:
    """libpq would take the key from PGSSLKEY or ~/.postgresql/postgresql.key."""
    with pytest.raises(ProviderError) as raised:
        connect_kwargs(_target(("sslcert", "/etc/esra/c.crt")), connect_timeout_s=5)
    assert raised.value.code is ProviderErrorCode.CONNECTION_TEMPLATE_INVALID
