"""TLS and authentication on the three front doors (issue 25, item 6; docs/security.md),
against Pravega's official Python client and against raw clients of each protocol.

A module-scoped front door of its own (:func:`secured`): an in-process cluster whose wire
gateways, gRPC API and REST API serve TLS with a self-signed certificate for ``localhost``
and 127.0.0.1, made at test time, and check the users of a password file:

* ``admin``: ``prn::*,READ_UPDATE`` (everything);
* ``reader``: ``prn::*,READ`` (read anything, change nothing);
* ``owner``: ``prn::/scope:owned,READ_UPDATE;prn::/scope:owned/*,READ_UPDATE`` (one scope);
* ``viewer``: ``prn::/scope:owned,READ;prn::/scope:owned/stream:visible,READ`` (one stream).

Each gateway builds its access control from the config on its own, as each container actor
does, so the delegation tokens the gRPC API signs checking out at the gateways shows the
secret is derived alike everywhere.
"""

from __future__ import annotations

import base64
import datetime
import http.client
import ipaddress
import json
import os
import re
import socket
import ssl
import subprocess
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest

from pravega_ray.auth import (
    AccessControl,
    DelegationTokens,
    Permission,
    derive_token_secret,
    password_file_entry,
    stream_resource,
)
from pravega_ray.endpoints import EndpointConfig
from pravega_ray.grpc import GrpcServer, message_class, method_path, serve
from pravega_ray.grpc.schema import RPCS
from pravega_ray.inprocess import InProcessCluster
from pravega_ray.naming import container_for_segment
from pravega_ray.rest import RestServer, serve_rest
from pravega_ray.stream_configuration import ReaderGroupConfig
from pravega_ray.wire.frames import FrameReader
from pravega_ray.wire.gateway import WireGateway
from pravega_ray.wire.replies import (
    AUTH_TOKEN_CHECK_FAILED,
    AUTH_TOKEN_EXPIRED,
    AppendSetup,
    AuthTokenCheckFailed,
    NoSuchSegment,
    SegmentCreated,
    StreamSegmentInfo,
)
from pravega_ray.wire.requests import (
    CreateTableSegment,
    GetStreamSegmentInfo,
    Hello,
    SetupAppend,
)
from pravega_ray.wire.wire_command import REPLIES, Reply, WireCommand
from tests.wire.official_client import READ_EVENTS

pytestmark = pytest.mark.timeout(300)

CONTAINERS = 2
PASSWORDS = {
    "admin": "admin-secret",
    "reader": "reader-secret",
    "owner": "owner-secret",
    "viewer": "viewer: secret",  # a password may hold ':' and blanks
}
ACLS = {
    "admin": "prn::*,READ_UPDATE",
    "reader": "prn::*,READ",
    "owner": "prn::/scope:owned,READ_UPDATE;prn::/scope:owned/*,READ_UPDATE",
    "viewer": "prn::/scope:owned,READ;prn::/scope:owned/stream:visible,READ",
}
HASH_ITERATIONS = 1000
"""Cheap hashes: the tests check passwords, not PBKDF2's cost."""
SCRIPT_TIMEOUT_S = 150.0
CALL_TIMEOUT_S = 10.0


def make_certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for ``localhost`` and 127.0.0.1 and its key, PEM files in
    ``directory``: by the ``cryptography`` package when it is installed, else ``openssl``.
    Not a CA certificate: the official client's rustls refuses a CA certificate as a
    server's own."""
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
    except ImportError:
        subprocess.run(
            [
                "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                "-subj", "/CN=localhost", "-keyout", str(key_path), "-out", str(cert_path),
                "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                "-addext", "basicConstraints=critical,CA:FALSE",
                "-addext", "extendedKeyUsage=serverAuth",
            ],
            check=True,
            capture_output=True,
        )  # fmt: skip
        return cert_path, key_path
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def _owned_by(container_id: int) -> Callable[[str], bool]:
    return lambda segment: container_for_segment(segment, CONTAINERS) == container_id


@dataclass
class Secured:
    """The secured front door: the cluster, its servers, the config and the files."""

    cluster: InProcessCluster
    grpc: GrpcServer
    rest: RestServer
    wire_ports: dict[int, int]
    config: EndpointConfig
    access: AccessControl
    cert_path: Path

    @property
    def controller_uri(self) -> str:
        return f"tls://localhost:{self.grpc.port}"

    def client_context(self) -> ssl.SSLContext:
        """A client SSL context trusting the test certificate."""
        return ssl.create_default_context(cafile=str(self.cert_path))


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    directory = tmp_path_factory.mktemp("security")
    cert_path, key_path = make_certificate(directory)
    password_file = directory / "passwd"
    lines = [
        password_file_entry(user, PASSWORDS[user], ACLS[user], iterations=HASH_ITERATIONS)
        for user in PASSWORDS
    ]
    password_file.write_text("# users of the secured front door\n" + "\n".join(lines) + "\n")
    password_file.chmod(0o600)
    config = EndpointConfig(
        grpc_port=0,
        rest_port=0,
        wire_port_base=0,
        tls_cert_file=str(cert_path),
        tls_key_file=str(key_path),
        password_file=str(password_file),
    )
    tls, access = config.tls_files(), config.access_control()
    assert tls is not None and access is not None
    cluster = InProcessCluster(CONTAINERS)
    gateways: list[WireGateway] = []
    ports: dict[int, int] = {}
    servers: list[GrpcServer | RestServer] = []
    try:
        for i in range(CONTAINERS):
            own = config.access_control()  # as each container actor builds its own
            assert own is not None
            gateway = WireGateway(
                cluster.container(i),
                owns=_owned_by(i),
                tls=tls.server_context(),
                tokens=own.tokens,
            )
            ports[i] = cluster.run(gateway.start()).result(10)
            gateways.append(gateway)

        def uri_for(segment: str) -> tuple[str, int]:
            port = ports[container_for_segment(segment, CONTAINERS)]
            return config.client_host("127.0.0.1"), port

        grpc_server = serve(cluster.core, "127.0.0.1", 0, uri_for, tls=tls, access=access)
        servers.append(grpc_server)
        rest_server = serve_rest(cluster.core, "127.0.0.1", 0, tls=tls, access=access)
        servers.append(rest_server)
        yield Secured(cluster, grpc_server, rest_server, ports, config, access, cert_path)
    finally:
        for server in servers:
            server.stop()
        for gateway in gateways:
            cluster.run(gateway.stop()).result(10)
        cluster.shutdown()


def _scope() -> str:
    return "s" + uuid.uuid4().hex[:10]


# --- the official client -------------------------------------------------------------------------
def run_official(
    python: Path,
    secured: Secured,
    user: str,
    password: str,
    script: str,
    *,
    timeout_s: float = SCRIPT_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """``script`` run by the official client, with ``manager`` a StreamManager over TLS with
    Basic credentials (``auth_enabled``, the ``pravega_client_auth_*`` variables, the
    certificate in ``pravega_client_tls_cert_path``) and ``read_events`` defined; the
    finished process (the script ends with ``os._exit``: see ``official_client``)."""
    prologue = (
        "import asyncio, pravega_client\n"
        f"manager = pravega_client.StreamManager({secured.controller_uri!r}, "
        "auth_enabled=True, tls_enabled=True)\n" + READ_EVENTS
    )
    epilogue = "\nimport os, sys\nsys.stdout.flush()\nos._exit(0)\n"
    env = {
        **os.environ,
        "pravega_client_auth_method": "Basic",
        "pravega_client_auth_username": user,
        "pravega_client_auth_password": password,
        "pravega_client_tls_cert_path": str(secured.cert_path),
    }
    return subprocess.run(
        [str(python), "-c", prologue + textwrap.dedent(script) + epilogue],
        capture_output=True,
        text=True,
        timeout=timeout_s,
        env=env,
    )


def _ok(done: subprocess.CompletedProcess[str]) -> Any:
    """The JSON the script printed last; fails the test with its output if it failed."""
    if done.returncode != 0:
        pytest.fail(f"the official client's script failed:\n{done.stdout}\n{done.stderr}")
    return json.loads(done.stdout.splitlines()[-1])


def test_official_client_over_tls_with_a_password_manages_writes_and_reads(
    client_python: Path, secured: Secured
) -> None:
    scope = _scope()
    out = _ok(
        run_official(
            client_python,
            secured,
            "admin",
            PASSWORDS["admin"],
            f"""
            import json
            created = [manager.create_scope("{scope}"), manager.create_stream("{scope}", "s", 2)]
            writer = manager.create_writer("{scope}", "s")
            for i in range(30):
                writer.write_event(f"event-{{i}}", f"key-{{i % 3}}")
            writer.flush()
            group = manager.create_reader_group("g", "{scope}", "s")
            reader = group.create_reader("r")
            got = read_events(reader, 30)
            print(json.dumps([
                created,
                "{scope}" in manager.list_scope(),
                manager.list_stream("{scope}"),
                sorted(got),
            ]))
            """,
        )
    )
    created, listed, streams, got = out
    assert created == [True, True] and listed
    assert [s.split("/")[-1] for s in streams] == ["s"]
    assert got == sorted(f"event-{i}" for i in range(30))


def test_official_client_with_a_wrong_password_fails_with_a_clear_error(
    client_python: Path, secured: Secured
) -> None:
    started = time.monotonic()
    done = run_official(
        client_python,
        secured,
        "admin",
        "not-the-password",
        """
        try:
            manager.create_scope("never")
        except BaseException as e:
            print("REFUSED", type(e).__name__, e)
        else:
            print("CREATED")
        """,
    )
    elapsed = time.monotonic() - started
    assert "REFUSED" in done.stdout, done.stdout + done.stderr
    assert "Unauthenticated" in done.stdout and "authentication failed" in done.stdout
    assert "never" not in secured.cluster.core.list_scopes()
    print(f"the client gave up after {elapsed:.0f} s")  # it retries UNAUTHENTICATED 10 times


def test_official_client_as_a_reader_reads_but_cannot_write(
    client_python: Path, secured: Secured
) -> None:
    scope = _scope()
    cluster = secured.cluster
    cluster.stream_manager().create_scope(scope)
    cluster.stream_manager().create_stream(scope, "s")
    with cluster.create_writer(scope, "s") as writer:
        for i in range(10):
            writer.write_event(f"written-{i}".encode(), routing_key="k")
        writer.flush()
    out = _ok(
        run_official(
            client_python,
            secured,
            "reader",
            PASSWORDS["reader"],
            f"""
            import json, threading
            try:
                manager.create_scope("{scope}-2")
                refused = None
            except BaseException as e:
                refused = str(e)
            group = manager.create_reader_group("g", "{scope}", "s")
            got = read_events(group.create_reader("r"), 10)
            writer = manager.create_writer("{scope}", "s")
            outcome = ["pending"]

            def write():
                try:
                    writer.write_event("forbidden", "k")
                    outcome[0] = "acked"
                except BaseException as e:
                    outcome[0] = f"refused: {{e}}"

            thread = threading.Thread(target=write, daemon=True)
            thread.start()
            thread.join(8)
            print(json.dumps([refused, got, outcome[0]]))
            """,
        )
    )
    refused, got, outcome = out
    assert refused is not None and "PermissionDenied" in refused, refused
    assert got == [f"written-{i}" for i in range(10)]
    # The gateway refuses the writer's SETUP_APPEND (AUTH_TOKEN_CHECK_FAILED): the 0.3.8
    # writer then fails the event ("must have connection" in its Rust core) or, were it to
    # retry, would wait; never is the event acknowledged.
    assert outcome != "acked", outcome
    cluster.create_reader_group(scope, "check", ReaderGroupConfig(streams=(f"{scope}/s",)))
    reader = cluster.create_reader("r", scope, "check")
    events = []
    while (event := reader.read_next_event(2.0)) is not None and event.event is not None:
        events.append(event.event)
    reader.close()
    assert events == [f"written-{i}".encode() for i in range(10)]  # nothing more


# --- gRPC ----------------------------------------------------------------------------------------
def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


_RESPONSES = {rpc.name: rpc.response for rpc in RPCS}


def grpc_call(
    secured: Secured, rpc: str, request: Any, user: str | None = None, password: str = ""
) -> Any:
    """``rpc``'s reply over TLS, as ``user`` (no credentials when None); grpc.RpcError for a
    status other than OK."""
    credentials = grpc.ssl_channel_credentials(root_certificates=secured.cert_path.read_bytes())
    with grpc.secure_channel(f"localhost:{secured.grpc.port}", credentials) as channel:
        stub = channel.unary_unary(
            method_path(rpc),
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=message_class(_RESPONSES[rpc]).FromString,
        )
        metadata = None if user is None else [("authorization", _basic(user, password))]
        return stub(request, timeout=CALL_TIMEOUT_S, metadata=metadata)


def grpc_code(secured: Secured, rpc: str, request: Any, user: str | None = None) -> Any:
    """The status code (OK for a reply) of ``rpc`` called as ``user`` with its password."""
    try:
        grpc_call(secured, rpc, request, user, PASSWORDS.get(user or "", ""))
    except grpc.RpcError as e:
        return e.code()
    return grpc.StatusCode.OK


def _stream_info(scope: str, stream: str) -> Any:
    return message_class("StreamInfo")(scope=scope, stream=stream)


@pytest.fixture(scope="module")
def scopes(secured: Secured) -> tuple[str, str]:
    """Scope ``owned`` (streams ``visible``, ``hidden``) and another one (stream ``s``)."""
    manager = secured.cluster.stream_manager()
    other = _scope()
    manager.create_scope("owned")
    manager.create_scope(other)
    for scope, stream in (("owned", "visible"), ("owned", "hidden"), (other, "s")):
        manager.create_stream(scope, stream)
    return "owned", other


def test_grpc_without_good_credentials_is_unauthenticated(secured: Secured) -> None:
    request = message_class("ScopesRequest")()
    for metadata in (
        None,
        _basic("admin", "wrong"),
        _basic("nobody", "admin-secret"),
        "Basic !!!not-base64",
        "Bearer some-keycloak-token",
    ):
        with pytest.raises(grpc.RpcError) as refused:
            if metadata is None:
                grpc_call(secured, "listScopes", request)
            else:
                credentials = grpc.ssl_channel_credentials(secured.cert_path.read_bytes())
                with grpc.secure_channel(f"localhost:{secured.grpc.port}", credentials) as ch:
                    stub = ch.unary_unary(
                        method_path("listScopes"),
                        request_serializer=lambda m: m.SerializeToString(),
                        response_deserializer=message_class("ScopesResponse").FromString,
                    )
                    stub(request, timeout=CALL_TIMEOUT_S, metadata=[("authorization", metadata)])
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert "authentication failed" in refused.value.details()
        assert "admin-secret" not in refused.value.details()
    # An RPC pravega-ray does not serve is authenticated first too.
    scale = message_class("ScaleStatusRequest")(streamInfo=_stream_info("owned", "visible"))
    assert grpc_code(secured, "checkScale", scale) == grpc.StatusCode.UNAUTHENTICATED
    assert grpc_code(secured, "checkScale", scale, "admin") == grpc.StatusCode.UNIMPLEMENTED


def test_grpc_checks_each_rpcs_permission_on_its_scope_or_stream(
    secured: Secured, scopes: tuple[str, str]
) -> None:
    owned, other = scopes
    config = message_class("StreamConfig")
    policy = message_class("ScalingPolicy")(scaleType=0, minNumSegments=1)

    def create(scope: str, stream: str) -> Any:
        return config(streamInfo=_stream_info(scope, stream), scalingPolicy=policy)

    ok, denied = grpc.StatusCode.OK, grpc.StatusCode.PERMISSION_DENIED
    scope_info = message_class("ScopeInfo")
    assert grpc_code(secured, "createScope", scope_info(scope=_scope()), "owner") == denied
    assert grpc_code(secured, "createScope", scope_info(scope=_scope()), "reader") == denied
    assert grpc_code(secured, "createScope", scope_info(scope=_scope()), "admin") == ok
    assert grpc_code(secured, "createStream", create(owned, _scope()), "owner") == ok
    assert grpc_code(secured, "createStream", create(other, _scope()), "owner") == denied
    assert grpc_code(secured, "createStream", create(owned, _scope()), "reader") == denied
    visible, hidden = _stream_info(owned, "visible"), _stream_info(owned, "hidden")
    assert grpc_code(secured, "getStreamConfiguration", visible, "viewer") == ok
    assert grpc_code(secured, "getStreamConfiguration", hidden, "viewer") == denied
    assert grpc_code(secured, "getCurrentSegments", visible, "reader") == ok
    assert grpc_code(secured, "sealStream", visible, "reader") == denied
    assert grpc_code(secured, "sealStream", visible, "viewer") == denied
    txn = message_class("CreateTxnRequest")(streamInfo=visible, lease=10_000)
    assert grpc_code(secured, "createTransaction", txn, "reader") == denied
    assert grpc_code(secured, "createTransaction", txn, "owner") == ok
    segment = message_class("SegmentId")(streamInfo=_stream_info(other, "s"), segmentId=0)
    assert grpc_code(secured, "getURI", segment, "owner") == denied
    assert grpc_code(secured, "getURI", segment, "reader") == ok
    reply = grpc_call(secured, "getURI", segment, "reader", PASSWORDS["reader"])
    assert reply.endpoint == "localhost"  # TLS: the certificate's name, not an IP
    with pytest.raises(grpc.RpcError) as refused:
        grpc_call(secured, "sealStream", visible, "viewer", PASSWORDS["viewer"])
    details = refused.value.details()
    assert "viewer" in details and "READ_UPDATE" in details


def test_grpc_lists_only_what_the_user_may_read(secured: Secured, scopes: tuple[str, str]) -> None:
    owned, other = scopes
    request = message_class("ScopesRequest")()

    def scopes_of(user: str) -> list[str]:
        names, token = [], None
        while token is None or names[-1:] != [token]:
            request.continuationToken.token = token or ""
            reply = grpc_call(secured, "listScopes", request, user, PASSWORDS[user])
            if not reply.scopes:
                break
            names += list(reply.scopes)
            token = reply.continuationToken.token
        return names

    assert scopes_of("owner") == [owned]
    assert {"_system", owned, other} <= set(scopes_of("admin"))
    streams = message_class("StreamsInScopeRequest")(scope=message_class("ScopeInfo")(scope=owned))
    listed = grpc_call(secured, "listStreamsInScope", streams, "viewer", PASSWORDS["viewer"])
    assert [s.stream for s in listed.streams] == ["visible"]
    listed = grpc_call(secured, "listStreamsInScope", streams, "owner", PASSWORDS["owner"])
    assert {"visible", "hidden"} <= {s.stream for s in listed.streams}
    streams.scope.scope = other
    assert grpc_code(secured, "listStreamsInScope", streams, "viewer") == (
        grpc.StatusCode.PERMISSION_DENIED
    )


def _claims(token: str) -> dict[str, Any]:
    """A token's payload as the official client reads it: the standard base64 alphabet,
    strictly, and ``exp`` found by its regex."""
    _header, payload, _signature = token.split(".")
    assert len(payload) % 4 == 0 and not set(payload) & set("+/-_=")
    text = base64.b64decode(payload, validate=True).decode()
    assert re.search(r'"exp":\s?(?P<body>\d+)', text)
    claims: dict[str, Any] = json.loads(text)
    return claims


def test_get_delegation_token_grants_what_the_user_may_do(
    secured: Secured, scopes: tuple[str, str]
) -> None:
    owned, _ = scopes

    def token(user: str, scope: str, stream: str) -> str:
        reply = grpc_call(
            secured, "getDelegationToken", _stream_info(scope, stream), user, PASSWORDS[user]
        )
        return str(reply.delegationToken)

    admin = _claims(token("admin", owned, "visible"))
    assert admin["sub"] == "admin" and admin["perm"] == "READ_UPDATE"
    assert admin["res"] == stream_resource(owned, "visible")
    assert 0 < admin["exp"] - time.time() <= 600
    assert _claims(token("reader", owned, "visible"))["perm"] == "READ"
    assert _claims(token("viewer", owned, "visible"))["perm"] == "READ"
    state = _claims(token("reader", owned, "group_kvtable"))  # a reader group's state
    assert state["res"] == "prn::/scope:owned/reader-group:group" and state["perm"] == "READ"
    hidden = _stream_info(owned, "hidden")
    assert grpc_code(secured, "getDelegationToken", hidden, "viewer") == (
        grpc.StatusCode.PERMISSION_DENIED
    )
    assert grpc_code(secured, "getDelegationToken", hidden) == grpc.StatusCode.UNAUTHENTICATED


def test_a_plaintext_grpc_client_gets_nothing_from_the_tls_server(secured: Secured) -> None:
    with grpc.insecure_channel(f"127.0.0.1:{secured.grpc.port}") as channel:
        stub = channel.unary_unary(
            method_path("listScopes"),
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=message_class("ScopesResponse").FromString,
        )
        with pytest.raises(grpc.RpcError) as refused:
            stub(
                message_class("ScopesRequest")(),
                timeout=CALL_TIMEOUT_S,
                metadata=[("authorization", _basic("admin", PASSWORDS["admin"]))],
            )
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


# --- REST ----------------------------------------------------------------------------------------
def rest(
    secured: Secured,
    method: str,
    path: str,
    user: str | None = None,
    password: str | None = None,
    body: dict[str, Any] | None = None,
) -> tuple[int, dict[str, str], Any]:
    """(status, headers, JSON body) of one HTTPS request to the REST API, as ``user``."""
    connection = http.client.HTTPSConnection(
        "localhost", secured.rest.port, timeout=CALL_TIMEOUT_S, context=secured.client_context()
    )
    headers = {"Content-Type": "application/json"}
    if user is not None:
        headers["Authorization"] = _basic(user, PASSWORDS[user] if password is None else password)
    try:
        connection.request(method, path, json.dumps(body) if body else None, headers)
        response = connection.getresponse()
        data = response.read()
        return response.status, dict(response.headers), json.loads(data) if data else None
    finally:
        connection.close()


def test_rest_asks_for_credentials_with_401(secured: Secured) -> None:
    assert secured.rest.url.startswith("https://")
    for user, password in ((None, None), ("admin", "wrong"), ("nobody", "x")):
        status, headers, body = rest(secured, "GET", "/v1/scopes", user, password)
        assert status == 401, body
        assert headers["WWW-Authenticate"].startswith("Basic")
        assert body["code"] == 401 and "authentication failed" in body["message"]
    status, _, _ = rest(secured, "GET", "/v1/health", None)
    assert status == 401
    assert rest(secured, "GET", "/v1/no-such-path", None)[0] == 401
    assert rest(secured, "GET", "/v1/no-such-path", "reader")[0] == 404
    assert rest(secured, "PATCH", "/v1/scopes", "reader")[0] == 405
    status, _, body = rest(secured, "GET", "/v1/health/readiness", "reader")
    assert status == 200


def test_rest_checks_permissions_with_403(secured: Secured, scopes: tuple[str, str]) -> None:
    owned, other = scopes
    scope = _scope()
    status, _, body = rest(secured, "POST", "/v1/scopes", "reader", body={"scopeName": scope})
    assert status == 403 and "READ_UPDATE on prn::/" in body["message"], body
    assert rest(secured, "POST", "/v1/scopes", "admin", body={"scopeName": scope})[0] == 201
    stream = {"streamName": "made"}
    assert rest(secured, "POST", f"/v1/scopes/{owned}/streams", "owner", body=stream)[0] == 201
    assert rest(secured, "POST", f"/v1/scopes/{other}/streams", "owner", body=stream)[0] == 403
    assert rest(secured, "GET", f"/v1/scopes/{other}/streams/s", "owner")[0] == 403
    assert rest(secured, "GET", f"/v1/scopes/{other}/streams/s", "reader")[0] == 200
    assert rest(secured, "HEAD", f"/v1/scopes/{other}/streams/s", "owner")[0] == 403
    sealed = {"streamState": "SEALED"}
    assert rest(secured, "PUT", f"/v1/scopes/{other}/streams/s/state", "reader", body=sealed)[
        0
    ] == (403)
    assert rest(secured, "DELETE", f"/v1/scopes/{scope}", "owner")[0] == 403
    assert rest(secured, "DELETE", f"/v1/scopes/{scope}", "admin")[0] == 204
    # Listings show only what the user may read.
    assert rest(secured, "GET", "/v1/scopes", "owner")[2] == {"scopes": [{"scopeName": owned}]}
    status, _, body = rest(secured, "GET", f"/v1/scopes/{owned}/streams", "viewer")
    assert status == 200 and [s["streamName"] for s in body["streams"]] == ["visible"]
    assert rest(secured, "GET", f"/v1/scopes/{other}/streams", "viewer")[0] == 403


def test_a_plaintext_http_client_gets_nothing_from_the_tls_server(secured: Secured) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", secured.rest.port, timeout=5)
    with pytest.raises((http.client.HTTPException, OSError)):
        connection.request("GET", "/v1/scopes", headers={"Authorization": _basic("admin", "x")})
        connection.getresponse().read()
    connection.close()


# --- the wire protocol ---------------------------------------------------------------------------
def wire(secured: Secured, segment: str, commands: list[WireCommand]) -> list[Reply]:
    """The replies, one per command, of the gateway owning ``segment``, over TLS."""
    port = secured.wire_ports[container_for_segment(segment, CONTAINERS)]
    replies: list[Reply] = []
    frames = FrameReader(REPLIES)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=CALL_TIMEOUT_S) as raw,
        secured.client_context().wrap_socket(raw, server_hostname="localhost") as connection,
    ):
        for command in commands:
            connection.sendall(command.encode())
            while (reply := frames.next_command()) is None:
                data = connection.recv(65536)
                assert data, "the gateway closed the connection"
                frames.feed(data)
            assert isinstance(reply, Reply)
            replies.append(reply)
    return replies


def _token(secured: Secured, user: str, scope: str, stream: str) -> str:
    reply = grpc_call(
        secured, "getDelegationToken", _stream_info(scope, stream), user, PASSWORDS[user]
    )
    return str(reply.delegationToken)


def _secret(secured: Secured) -> bytes:
    """The tokens' secret, derived as docs/security.md says: from the password file's and
    the TLS key's bytes."""
    assert secured.config.password_file and secured.config.tls_key_file
    return derive_token_secret(
        Path(secured.config.password_file).read_bytes(),
        Path(secured.config.tls_key_file).read_bytes(),
    )


def test_wire_requests_need_a_good_delegation_token(
    secured: Secured, scopes: tuple[str, str]
) -> None:
    owned, other = scopes
    segment = f"{owned}/visible/0.#epoch.0"
    hello = Hello(high_version=15, low_version=5)

    def info(token: str) -> GetStreamSegmentInfo:
        return GetStreamSegmentInfo(request_id=7, segment_name=segment, delegation_token=token)

    expired = DelegationTokens(_secret(secured), clock=lambda: time.time() - 3600).issue(
        "admin", stream_resource(owned, "visible"), Permission.READ_UPDATE
    )
    forged = DelegationTokens(os.urandom(32)).issue(
        "admin", stream_resource(owned, "visible"), Permission.READ_UPDATE
    )
    signed_here = DelegationTokens(_secret(secured)).issue(
        "admin", stream_resource(owned, "visible"), Permission.READ
    )
    reader = _token(secured, "reader", owned, "visible")
    elsewhere = _token(secured, "admin", other, "s")
    replies = wire(
        secured,
        segment,
        [
            hello,
            info(""),
            info("not.a-token"),
            info(forged),
            info(elsewhere),
            info(expired),
            info(reader),
            info(signed_here),
            SetupAppend(request_id=8, writer_id=1, segment=segment, delegation_token=reader),
            SetupAppend(
                request_id=9,
                writer_id=1,
                segment=segment,
                delegation_token=_token(secured, "admin", owned, "visible"),
            ),
        ],
    )
    assert replies[0] == Hello(high_version=15, low_version=5)
    refusals = [*replies[1:6], replies[8]]
    assert all(isinstance(r, AuthTokenCheckFailed) for r in refusals), refusals
    codes = [r.error_code for r in refusals if isinstance(r, AuthTokenCheckFailed)]
    assert codes == [AUTH_TOKEN_CHECK_FAILED] * 4 + [AUTH_TOKEN_EXPIRED, AUTH_TOKEN_CHECK_FAILED]
    assert [r.request_id for r in refusals if isinstance(r, AuthTokenCheckFailed)] == [7] * 5 + [8]
    assert isinstance(replies[6], StreamSegmentInfo | NoSuchSegment)
    assert isinstance(replies[7], StreamSegmentInfo | NoSuchSegment)  # ours, not the RPC's
    assert isinstance(replies[9], AppendSetup)


def test_a_readers_token_for_a_reader_group_keeps_the_groups_state(
    secured: Secured, scopes: tuple[str, str]
) -> None:
    owned, _ = scopes
    table = f"{owned}/{uuid.uuid4().hex[:8]}_kvtable/0.#epoch.0"
    group_token = _token(secured, "reader", owned, table.split("/")[1])
    stream_token = _token(secured, "reader", owned, "visible")
    replies = wire(
        secured,
        table,
        [
            CreateTableSegment(request_id=1, segment=table, delegation_token=stream_token),
            CreateTableSegment(request_id=2, segment=table, delegation_token=group_token),
            # The group's token opens no event stream of that name.
            SetupAppend(request_id=3, writer_id=5, segment=table, delegation_token=group_token),
        ],
    )
    assert isinstance(replies[0], AuthTokenCheckFailed)
    assert isinstance(replies[1], SegmentCreated)
    assert isinstance(replies[2], AuthTokenCheckFailed)


def test_a_plaintext_wire_client_gets_no_hello_from_the_tls_gateway(secured: Secured) -> None:
    port = secured.wire_ports[0]
    with socket.create_connection(("127.0.0.1", port), timeout=CALL_TIMEOUT_S) as connection:
        connection.sendall(Hello(high_version=15, low_version=5).encode())
        try:
            data = connection.recv(65536)
        except OSError:
            data = b""
    assert Hello(high_version=15, low_version=5).encode() not in data
