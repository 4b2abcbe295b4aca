"""Passwords, ACLs, delegation tokens (pravega_ray/auth.py) and the endpoints' security rules
(pravega_ray/endpoints.py): Pravega's password file format, its first-match ACLs, tokens the
official client can parse, and a config that refuses to expose anything unprotected."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import re
import ssl
import string
from pathlib import Path

import pytest

from pravega_ray import auth
from pravega_ray.auth import (
    AccessControl,
    DelegationTokens,
    PasswordFile,
    Permission,
    TokenStatus,
    check_password,
    derive_token_secret,
    hash_password,
    parse_acl,
    password_file_entry,
    reader_group_resource,
    scope_resource,
    segment_requirements,
    stream_resource,
)
from pravega_ray.endpoints import EndpointConfig, TlsFiles
from pravega_ray.errors import ConfigurationError, InvalidArgumentError, InvalidNameError
from pravega_ray.grpc import serve
from pravega_ray.rest import serve_rest
from tests.wire.test_security import make_certificate

pytestmark = pytest.mark.timeout(60)

PRAVEGA_ADMIN_HASH = (
    "353030303a633132666135376233353937356534613430383430373939343839333733616463363433616532"
    "363238653930346230333035393666643961316264616661393a363937633062366339663434386464326266"
    "333532646365306261396533643961386430626432383963303762616666356361316633373365363138373235"
    "3134643961303435613237653130353633633031653364366565316434626534656565636335663666306465"
    "663064376165313765646263656638373764396361"
)
"""The admin entry of Pravega's own ``config/passwd`` (pravega/pravega), written by its
``PasswordCreatorTool``; the password is standalone's documented ``1111_aaaa``."""
ITERATIONS = 1000


def _passwords(tmp_path: Path, users: dict[str, tuple[str, str]]) -> Path:
    path = tmp_path / "passwd"
    path.write_text(
        "\n".join(
            password_file_entry(user, password, acl, iterations=ITERATIONS)
            for user, (password, acl) in users.items()
        )
        + "\n"
    )
    return path


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return make_certificate(tmp_path_factory.mktemp("tls"))


# --- passwords -----------------------------------------------------------------------------------
def test_check_password_reads_pravegas_own_password_file() -> None:
    passwords = PasswordFile.parse("passwd", f"admin:{PRAVEGA_ADMIN_HASH}:prn::*,READ_UPDATE;\n")
    account = passwords.users["admin"]
    assert check_password("1111_aaaa", account.password_hash)
    assert not check_password("1111_aaab", account.password_hash)
    assert account.permission("prn::/scope:anything/stream:x") is Permission.READ_UPDATE


def test_hash_password_writes_pravegas_format() -> None:
    salt = bytes(range(32))
    encoded = hash_password("s3cret", iterations=ITERATIONS, salt=salt)
    iterations, salt_hex, digest_hex = bytes.fromhex(encoded).decode().split(":")
    expected = hashlib.pbkdf2_hmac("sha256", b"s3cret", salt, ITERATIONS, dklen=64)
    assert (int(iterations), salt_hex, digest_hex) == (ITERATIONS, salt.hex(), expected.hex())
    assert check_password("s3cret", encoded) and not check_password("s3cret ", encoded)
    assert hash_password("s3cret", iterations=ITERATIONS) != encoded  # a random salt each time
    assert int(bytes.fromhex(hash_password("x")).decode().split(":")[0]) == 600_000


@pytest.mark.parametrize(
    ("password", "iterations"), [("", 1000), ("x", 0), ("x", True), ("x", 10**8)]
)
def test_hash_password_refuses_bad_arguments(password: str, iterations: int) -> None:
    with pytest.raises(InvalidArgumentError):
        hash_password(password, iterations=iterations)


@pytest.mark.parametrize("encoded", ["", "zz", "3a3a", b"5000:ab".hex(), b"0:ab:cd".hex()])
def test_check_password_of_a_malformed_hash_is_false(encoded: str) -> None:
    assert not check_password("x", encoded)


# --- ACLs ----------------------------------------------------------------------------------------
def test_parse_acl_reads_pravegas_new_format() -> None:
    entries = parse_acl(" prn::/scope:a , READ_UPDATE ;prn::/scope:a/*,READ;prn::*,NONE;")
    assert [(e.pattern, e.permission) for e in entries] == [
        ("prn::/scope:a", Permission.READ_UPDATE),
        ("prn::/scope:a/*", Permission.READ),
        ("prn::*", Permission.NONE),
    ]
    assert parse_acl("") == () and parse_acl(" ; ") == ()


@pytest.mark.parametrize(
    "acl",
    ["prn::*", "prn::*,WRITE", "prn::*,READ,READ", ",READ", "/scope:a,READ", "*,READ_UPDATE"],
)
def test_parse_acl_refuses_what_is_not_an_entry(acl: str) -> None:
    with pytest.raises(InvalidArgumentError):
        parse_acl(acl)


def test_the_first_matching_entry_decides() -> None:
    account = auth.UserAccount(
        "u", "", parse_acl("prn::/scope:a,READ;prn::/scope:a/*,READ_UPDATE;prn::*,READ")
    )
    assert account.permission(scope_resource("a")) is Permission.READ
    assert account.permission(stream_resource("a", "s")) is Permission.READ_UPDATE
    assert account.permission(stream_resource("b", "s")) is Permission.READ
    first = auth.UserAccount("u", "", parse_acl("prn::*,READ;prn::/scope:a/*,READ_UPDATE"))
    assert first.permission(stream_resource("a", "s")) is Permission.READ  # Pravega's order
    assert auth.UserAccount("u", "", ()).permission(scope_resource("a")) is Permission.NONE


def test_patterns_are_literal_but_for_the_star() -> None:
    entry = parse_acl("prn::/scope:a.b/*,READ")[0]
    assert entry.matches(stream_resource("a.b", "s"))
    assert not entry.matches(stream_resource("axb", "s"))  # '.' is no regex wildcard
    assert not entry.matches(scope_resource("a.b"))  # the scope itself is another resource
    assert parse_acl("prn::/scope:a/.*,READ")[0].matches(stream_resource("a", "s"))
    assert not parse_acl("prn::/scope:a,READ")[0].matches(scope_resource("ab"))


# --- password files ------------------------------------------------------------------------------
def test_password_file_skips_comments_and_blank_lines(tmp_path: Path) -> None:
    entry = password_file_entry("bob", "pw:with colon", "prn::*,READ", iterations=ITERATIONS)
    path = tmp_path / "passwd"
    path.write_text(f"# users\n\n{entry}\nalice:{PRAVEGA_ADMIN_HASH}\n")
    users = PasswordFile.load(str(path)).users
    assert set(users) == {"bob", "alice"}
    assert users["alice"].acl == ()  # no ACL: no permission anywhere
    assert check_password("pw:with colon", users["bob"].password_hash)
    assert "pw" not in repr(users["bob"]) and users["bob"].password_hash not in repr(users["bob"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("just-a-name\n", "line 1: not <user>:<password hash>:<acl>"),
        (f"# c\nbob:{'ab' * 40}:prn::*,READ\n", "line 2: the password hash is not"),
        (f"bob:{PRAVEGA_ADMIN_HASH}:prn::*,READ\nbob:{PRAVEGA_ADMIN_HASH}\n", "named twice"),
        (f"bob:{PRAVEGA_ADMIN_HASH}:/scope:x,READ\n", "line 1: an ACL resource starts with"),
        ("# nobody\n", "names no user"),
    ],
)
def test_a_malformed_password_file_names_file_and_line_not_content(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "passwd"
    path.write_text(text)
    with pytest.raises(ConfigurationError, match=re.escape(message)) as refused:
        PasswordFile.load(str(path))
    assert str(path) in str(refused.value) and PRAVEGA_ADMIN_HASH not in str(refused.value)


def test_an_unreadable_password_file_is_a_configuration_error(tmp_path: Path) -> None:
    missing = tmp_path / "absent"
    with pytest.raises(ConfigurationError, match=re.escape(str(missing))):
        PasswordFile.load(str(missing))


@pytest.mark.parametrize("user", ["", "a:b", "#a", " a", "a\nb", 7])
def test_password_file_entry_refuses_a_bad_user_name(user: str) -> None:
    with pytest.raises(InvalidArgumentError):
        password_file_entry(user, "pw", "prn::*,READ", iterations=ITERATIONS)


# --- delegation tokens ---------------------------------------------------------------------------
SECRET = derive_token_secret(b"password file", b"tls key")
RESOURCE = stream_resource("sc", "st")


def test_a_token_checks_out_for_its_resource_and_permission() -> None:
    tokens = DelegationTokens(SECRET)
    token = tokens.issue("alice", RESOURCE, Permission.READ_UPDATE)
    for needed in (Permission.READ, Permission.READ_UPDATE):
        check = tokens.check(token, {RESOURCE: needed})
        assert check.ok and check.user == "alice"
    read_only = tokens.issue("bob", RESOURCE, Permission.READ)
    check = tokens.check(read_only, {RESOURCE: Permission.READ_UPDATE})
    assert check.status is TokenStatus.INVALID and "READ_UPDATE is needed" in check.reason
    check = tokens.check(token, {stream_resource("sc", "other"): Permission.READ})
    assert check.status is TokenStatus.INVALID and "not for" in check.reason


def test_a_token_expires_and_says_so() -> None:
    now = [1_700_000_000.0]
    tokens = DelegationTokens(SECRET, ttl_s=60, clock=lambda: now[0])
    token = tokens.issue("alice", RESOURCE, Permission.READ)
    now[0] += 59
    assert tokens.check(token, {RESOURCE: Permission.READ}).ok
    now[0] += 1
    assert tokens.check(token, {RESOURCE: Permission.READ}).status is TokenStatus.EXPIRED


def test_a_token_not_signed_with_the_secret_is_refused() -> None:
    tokens = DelegationTokens(SECRET)
    token = tokens.issue("bob", RESOURCE, Permission.READ)
    header, payload, signature = token.split(".")
    claims = json.loads(base64.b64decode(payload))
    claims["perm"] = "READ_UPDATE"
    raised = base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode()
    others = DelegationTokens(derive_token_secret(b"another file"))
    for bad in (
        f"{header}.{raised}.{signature}",
        others.issue("bob", RESOURCE, Permission.READ),
        "",
        "a.b",
        "a.b.c",
        "é.b.c",
        "x" * 10_000,
        f"{header}.{payload}.{signature[:-2]}",
    ):
        check = tokens.check(bad, {RESOURCE: Permission.READ})
        assert check.status is TokenStatus.INVALID and not check.user, bad[:40]


def test_token_payloads_decode_as_the_official_client_decodes_them() -> None:
    # Its pravega-client-auth: base64::decode (standard alphabet, padding) and a regex for exp.
    rng = random.Random(25)
    tokens = DelegationTokens(SECRET)
    alphabet = string.printable + "é€>?~\x7f"
    for _ in range(300):
        user = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 30)))
        resource = "prn::/scope:" + "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 40)))
        token = tokens.issue(user, resource, Permission.READ)
        payload = token.split(".")[1]
        assert not set(payload) & set("+/-_=") and len(payload) % 4 == 0
        text = base64.b64decode(payload, validate=True).decode("ascii")
        assert re.search(r'"exp":\s?(?P<body>\d+)', text)
        assert json.loads(text)["sub"] == user
        assert tokens.check(token, {resource: Permission.READ}).ok


def test_delegation_tokens_keep_their_secret_to_themselves() -> None:
    tokens = DelegationTokens(SECRET)
    assert SECRET.hex() not in repr(tokens) and str(SECRET) not in repr(tokens)
    with pytest.raises(InvalidArgumentError):
        DelegationTokens(b"short")
    with pytest.raises(InvalidArgumentError):
        tokens.issue("alice", RESOURCE, Permission.NONE)


def test_derive_token_secret_is_deterministic_and_depends_on_every_byte() -> None:
    assert derive_token_secret(b"a", b"b") == derive_token_secret(b"a", b"b")
    assert len(derive_token_secret(b"a")) == 32
    different = {derive_token_secret(*m) for m in ((b"a", b"b"), (b"b", b"a"), (b"ab", b""))}
    assert len(different) == 3
    with pytest.raises(InvalidArgumentError):
        derive_token_secret(b"", b"")


def test_segment_requirements_name_the_stream_and_for_group_state_the_group() -> None:
    read, write = Permission.READ, Permission.READ_UPDATE
    assert segment_requirements("sc/st/3.#epoch.1", mutation=False, table=False) == {
        stream_resource("sc", "st"): read
    }
    derived = "sc/st/0.#epoch.0#transaction." + "ab" * 16
    assert segment_requirements(derived, mutation=True, table=False) == {
        stream_resource("sc", "st"): write
    }
    state = "sc/rg_kvtable/0.#epoch.0"
    assert segment_requirements(state, mutation=True, table=True) == {
        stream_resource("sc", "rg_kvtable"): write,
        reader_group_resource("sc", "rg"): read,
    }
    assert segment_requirements(state, mutation=True, table=False) == {
        stream_resource("sc", "rg_kvtable"): write
    }
    for name in ("sc/st", "../x/0.#epoch.0", "sc/st/0.#epoch.0/extra"):
        with pytest.raises(InvalidNameError):
            segment_requirements(name, mutation=False, table=False)


# --- access control ------------------------------------------------------------------------------
def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture
def access(tmp_path: Path) -> AccessControl:
    path = _passwords(
        tmp_path,
        {"alice": ("a:pw", "prn::*,READ_UPDATE"), "bob": ("b-pw", "prn::/scope:x/*,READ")},
    )
    return AccessControl(PasswordFile.load(str(path)), DelegationTokens(SECRET))


def test_authenticate_takes_basic_credentials_only(access: AccessControl) -> None:
    assert access.authenticate(_basic("alice", "a:pw")) == "alice"
    assert access.authenticate("basic " + _basic("bob", "b-pw").split()[1]) == "bob"
    for bad in (
        None,
        "",
        _basic("alice", "a:pw "),
        _basic("carol", "a:pw"),
        _basic("", ""),
        "Basic",
        "Basic %%%",
        "Basic " + base64.b64encode(b"no-colon").decode(),
        "Bearer " + _basic("alice", "a:pw").split()[1],
        "Basic " + "A" * 5000,
    ):
        assert access.authenticate(bad) is None, bad


def test_authenticate_checks_a_password_once_then_remembers_it(
    access: AccessControl, monkeypatch: pytest.MonkeyPatch
) -> None:
    checks = []
    real = auth.check_password

    def counted(password: str, encoded: str) -> bool:
        checks.append(1)
        return real(password, encoded)

    monkeypatch.setattr(auth, "check_password", counted)
    monkeypatch.setattr(auth, "_CREDENTIAL_CACHE_ENTRIES_MAX", 1)
    for _ in range(3):
        assert access.authenticate(_basic("alice", "a:pw")) == "alice"
    assert len(checks) == 1
    assert access.authenticate(_basic("alice", "wrong")) is None  # failures are not kept
    assert access.authenticate(_basic("bob", "b-pw")) == "bob"  # evicts alice's
    assert access.authenticate(_basic("alice", "a:pw")) == "alice"
    assert len(checks) == 4


def test_stream_access_of_a_reader_groups_state_is_the_groups(access: AccessControl) -> None:
    assert access.stream_access("bob", "x", "s") == (stream_resource("x", "s"), Permission.READ)
    assert access.stream_access("bob", "x", "g_kvtable") == (
        reader_group_resource("x", "g"),
        Permission.READ,
    )
    assert access.stream_access("bob", "y", "s")[1] is Permission.NONE
    assert access.stream_access("nobody", "x", "s")[1] is Permission.NONE
    assert access.permission("alice", auth.ROOT_RESOURCE) is Permission.READ_UPDATE


# --- the endpoints' configuration ----------------------------------------------------------------
def test_a_non_loopback_host_needs_tls_and_authentication(
    tmp_path: Path, tls: tuple[Path, Path]
) -> None:
    cert, key = (str(p) for p in tls)
    passwords = str(_passwords(tmp_path, {"alice": ("pw", "prn::*,READ_UPDATE")}))
    with pytest.raises(ConfigurationError, match=r"without TLS .* and authentication") as e:
        EndpointConfig("0.0.0.0")
    assert "insecure_ok" in str(e.value)
    with pytest.raises(ConfigurationError, match=r"without authentication \(password_file\)"):
        EndpointConfig("10.1.2.3", tls_cert_file=cert, tls_key_file=key)
    with pytest.raises(ConfigurationError, match=r"without TLS \(tls_cert_file, tls_key_file\):"):
        EndpointConfig("0.0.0.0", password_file=passwords)
    secured = EndpointConfig(
        "0.0.0.0", tls_cert_file=cert, tls_key_file=key, password_file=passwords
    )
    assert secured.secured and secured.tls_enabled and secured.auth_enabled
    assert EndpointConfig("0.0.0.0", insecure_ok=True).insecure_ok
    assert not EndpointConfig().secured  # loopback needs neither


def test_tls_files_are_checked_when_the_config_is_built(
    tmp_path: Path, tls: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory
) -> None:
    cert, key = (str(p) for p in tls)
    missing = str(tmp_path / "absent.pem")
    with pytest.raises(ConfigurationError, match=re.escape(f"TLS certificate file {missing}")):
        EndpointConfig(tls_cert_file=missing, tls_key_file=key)
    with pytest.raises(ConfigurationError, match=re.escape(f"TLS key file {missing}")):
        EndpointConfig(tls_cert_file=cert, tls_key_file=missing)
    with pytest.raises(ConfigurationError, match="go together"):
        EndpointConfig(tls_cert_file=cert)
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello")
    with pytest.raises(ConfigurationError, match=re.escape(f"{not_pem} is not PEM")):
        EndpointConfig(tls_cert_file=str(not_pem), tls_key_file=key)
    _, other_key = make_certificate(tmp_path_factory.mktemp("other"))
    with pytest.raises(ConfigurationError, match="do not load together") as refused:
        EndpointConfig(tls_cert_file=cert, tls_key_file=str(other_key))
    assert "PRIVATE KEY" not in str(refused.value)
    encrypted = tmp_path / "encrypted.pem"
    encrypted.write_text(
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n"
    )
    with pytest.raises(ConfigurationError, match="is encrypted"):
        TlsFiles(cert, str(encrypted))
    context = TlsFiles(cert, key).server_context()
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2


def test_a_bad_password_file_is_refused_when_the_config_is_built(tmp_path: Path) -> None:
    path = tmp_path / "passwd"
    path.write_text("bob:nothex:prn::*,READ\n")
    with pytest.raises(ConfigurationError, match=re.escape(f"password file {path}, line 1")):
        EndpointConfig(password_file=str(path))


def test_the_config_round_trips_through_its_dict_without_any_secret(
    tmp_path: Path, tls: tuple[Path, Path]
) -> None:
    cert, key = (str(p) for p in tls)
    passwords = _passwords(tmp_path, {"alice": ("very-secret-pw", "prn::*,READ_UPDATE")})
    config = EndpointConfig(
        "0.0.0.0",
        0,
        0,
        0,
        tls_cert_file=cert,
        tls_key_file=key,
        password_file=str(passwords),
        published_host="pravega.example.com",
    )
    assert EndpointConfig(**config.to_dict()) == config  # type: ignore[arg-type]
    relative = os.path.relpath(key)
    assert EndpointConfig(tls_cert_file=cert, tls_key_file=relative).tls_key_file == key
    described = json.dumps(config.to_dict()) + repr(config)
    key_body = Path(key).read_text().splitlines()[1]
    hashed = passwords.read_text().split(":")[1]
    for secret in ("very-secret-pw", key_body, hashed):
        assert secret not in described
    access = config.access_control()
    assert access is not None and "very-secret-pw" not in repr(access)
    assert hashed not in repr(access) and key_body not in repr(access)


def test_every_process_reading_the_same_files_signs_alike(
    tmp_path: Path, tls: tuple[Path, Path]
) -> None:
    cert, key = (str(p) for p in tls)
    passwords = str(_passwords(tmp_path, {"alice": ("pw", "prn::*,READ_UPDATE")}))
    config = EndpointConfig(tls_cert_file=cert, tls_key_file=key, password_file=passwords)
    first, second = config.access_control(), EndpointConfig(**config.to_dict()).access_control()  # type: ignore[arg-type]
    assert first is not None and second is not None
    token = first.tokens.issue("alice", RESOURCE, Permission.READ)
    assert second.tokens.check(token, {RESOURCE: Permission.READ}).ok
    without_tls = EndpointConfig(password_file=passwords).access_control()
    assert without_tls is not None
    assert not without_tls.tokens.check(token, {RESOURCE: Permission.READ}).ok
    assert EndpointConfig().access_control() is None and EndpointConfig().tls_files() is None


def test_client_host_is_a_name_the_certificate_can_carry(tls: tuple[Path, Path]) -> None:
    cert, key = (str(p) for p in tls)
    assert EndpointConfig().client_host("127.0.0.1") == "127.0.0.1"
    with_tls = EndpointConfig(tls_cert_file=cert, tls_key_file=key)
    assert with_tls.client_host("127.0.0.1") == "localhost"
    named = EndpointConfig(published_host="node-1.example.com")
    assert named.client_host("10.0.0.1", "node-2") == "node-1.example.com"
    everywhere = EndpointConfig("0.0.0.0", tls_cert_file=cert, tls_key_file=key, insecure_ok=True)
    assert everywhere.client_host("10.0.0.1", "node-2.example.com") == "node-2.example.com"
    assert EndpointConfig("0.0.0.0", insecure_ok=True).client_host("10.0.0.1", "n") == "10.0.0.1"
    for bad in ("", "http://x", "a b", "x:9090", "-x"):
        with pytest.raises(InvalidArgumentError):
            EndpointConfig(published_host=bad)


def test_the_servers_refuse_a_non_loopback_host_without_both(tls: tuple[Path, Path]) -> None:
    tls_files = TlsFiles(*(str(p) for p in tls))
    with pytest.raises(ConfigurationError, match="insecure_ok"):
        serve(object(), "0.0.0.0", 0, tls=tls_files)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="insecure_ok"):
        serve_rest(object(), "10.1.2.3", 0, tls=tls_files)  # type: ignore[arg-type]
