"""Who may use Pravega's endpoints, and for what (issue 25, item 6; docs/security.md).

Three pieces, each usable alone, all stdlib:

* **Passwords and ACLs**: Pravega's ``PasswordAuthHandler`` file, one user a line::

      # comment
      <user>:<password hash>:<acl>

  The hash is Pravega's ``StrongPasswordProcessor`` format, so a file written by Pravega's
  ``PasswordCreatorTool`` works here and one written by :func:`hash_password` works there:
  ``hex("<iterations>:<hex salt>:<hex hash>")`` with PBKDF2-HMAC-SHA256, a 32-byte salt and
  a 64-byte hash. The ACL is Pravega's new format: ``;``-separated entries
  ``<resource pattern>,<permission>``, e.g. ``prn::/scope:iot,READ_UPDATE;prn::*,READ``.
  A permission is NONE, READ or READ_UPDATE; ``*`` in a pattern matches any run of
  characters, ``/`` included (``.*`` too, as Pravega's regex patterns write it); the first
  entry whose pattern matches the whole resource decides (Pravega's ``AclAuthorizerImpl``).
* **Resources**, as Pravega's ``AuthorizationResourceImpl`` names them: ``prn::/`` (all
  scopes), ``prn::/scope:<s>``, ``prn::/scope:<s>/stream:<t>``,
  ``prn::/scope:<s>/reader-group:<g>``, ``prn::/scope:<s>/key-value-table:<k>``.
* **Delegation tokens**: what the controller hands a client for the segment store
  (getDelegationToken) and every wire request carries. A JWT (``header.payload.signature``,
  base64url, HS256: HMAC-SHA256 with a secret shared by the endpoints) whose payload is
  ``{"sub": <user>, "aud": "segmentstore", "iat": <s>, "exp": <s>, "res": <resource>,
  "perm": <permission>}``. The official client decodes the payload with the *standard*
  base64 alphabet and reads ``exp`` with a regex, so the payload is written to encode the
  same in both alphabets, without padding (:func:`_jwt_safe_json`).

:class:`AccessControl` puts them together for a server: ``authenticate`` an HTTP/gRPC
``authorization`` header (``Basic base64(user:password)``), ``permission`` of a user on a
resource, and the server's :class:`DelegationTokens`. Nothing here logs or returns a password,
a hash or a secret; errors name the file and line, never their content.
"""

from __future__ import annotations

import base64
import binascii
import collections
import enum
import hashlib
import hmac
import json
import os
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pravega_ray.errors import ConfigurationError, InvalidArgumentError
from pravega_ray.naming import parent_segment_name, parse_segment_name, validate_segment_name

__all__ = [
    "DELEGATION_TOKEN_TTL_S",
    "PASSWORD_HASH_ITERATIONS",
    "READER_GROUP_STATE_SUFFIX",
    "ROOT_RESOURCE",
    "AccessControl",
    "AccessControlEntry",
    "DelegationTokens",
    "PasswordFile",
    "Permission",
    "TokenCheck",
    "TokenStatus",
    "UserAccount",
    "check_password",
    "derive_token_secret",
    "hash_password",
    "key_value_table_resource",
    "parse_acl",
    "password_file_entry",
    "reader_group_of_state_stream",
    "reader_group_resource",
    "scope_resource",
    "segment_requirements",
    "segment_stream",
    "stream_resource",
]

PASSWORD_HASH_ITERATIONS = 600_000
"""PBKDF2 rounds :func:`hash_password` uses (OWASP's figure for PBKDF2-HMAC-SHA256; Pravega's
tool uses 5,000, which this module reads too). A check costs about 0.3 s; a server checks a
user's credentials once and then remembers them (:class:`AccessControl`)."""
PASSWORD_HASH_ITERATIONS_MAX = 10_000_000
"""The most rounds a stored hash may ask for: more is refused as a malformed file."""
_SALT_BYTES = 32
_HASH_BYTES = 64
_PASSWORD_FILE_BYTES_MAX = 4 * 1024 * 1024
"""A larger password file is refused (ConfigurationError)."""
_CREDENTIALS_BYTES_MAX = 4096
"""A longer ``authorization`` header is refused without decoding it."""
_CREDENTIAL_CACHE_ENTRIES_MAX = 1024
"""Credentials :class:`AccessControl` remembers as checked (least recently used dropped)."""

DELEGATION_TOKEN_TTL_S = 600
"""How long a delegation token is good for (Pravega's default); the official client asks for
a new one 5 s before ``exp``."""
_TOKEN_BYTES_MAX = 8192
_TOKEN_SECRET_BYTES_MIN = 32
_TOKEN_AUDIENCE = "segmentstore"
_JWT_HEADER = {"alg": "HS256", "typ": "JWT"}

ROOT_RESOURCE = "prn::/"
"""Pravega's resource for "all scopes": creating and deleting a scope need READ_UPDATE on it."""
_DOMAIN = "prn::"
READER_GROUP_STATE_SUFFIX = "_kvtable"
"""The official client keeps a reader group's state in the table segment of stream
``<group>_kvtable``: access to it follows the reader group's resource (docs/security.md)."""


class Permission(enum.IntEnum):
    """Pravega's ``AuthHandler.Permissions``, in order: a higher one includes the lower."""

    NONE = 0
    READ = 1
    READ_UPDATE = 2


# --- resources -----------------------------------------------------------------------------------
def scope_resource(scope: str) -> str:
    """``prn::/scope:<scope>``."""
    return f"{_DOMAIN}/scope:{scope}"


def stream_resource(scope: str, stream: str) -> str:
    """``prn::/scope:<scope>/stream:<stream>``."""
    return f"{scope_resource(scope)}/stream:{stream}"


def reader_group_resource(scope: str, group: str) -> str:
    """``prn::/scope:<scope>/reader-group:<group>``."""
    return f"{scope_resource(scope)}/reader-group:{group}"


def key_value_table_resource(scope: str, table: str) -> str:
    """``prn::/scope:<scope>/key-value-table:<table>``."""
    return f"{scope_resource(scope)}/key-value-table:{table}"


def reader_group_of_state_stream(stream: str) -> str | None:
    """The reader group whose state stream ``stream`` is (``<group>_kvtable``), else None."""
    if stream.endswith(READER_GROUP_STATE_SUFFIX) and len(stream) > len(READER_GROUP_STATE_SUFFIX):
        return stream[: -len(READER_GROUP_STATE_SUFFIX)]
    return None


def segment_stream(segment: str) -> tuple[str, str]:
    """``(scope, stream)`` of any segment name: a stream segment, or a transaction or
    transient segment of one. InvalidNameError for anything else."""
    parsed = parse_segment_name(parent_segment_name(validate_segment_name(segment)))
    return parsed.scope, parsed.stream


# --- passwords -----------------------------------------------------------------------------------
def hash_password(
    password: str, *, iterations: int = PASSWORD_HASH_ITERATIONS, salt: bytes | None = None
) -> str:
    """``password`` hashed for a password file: Pravega's ``StrongPasswordProcessor`` format,
    ``hex("<iterations>:<hex salt>:<hex hash>")``, PBKDF2-HMAC-SHA256 with a random 32-byte
    salt (``salt`` for tests only) and a 64-byte hash. InvalidArgumentError for an empty
    password or iterations outside [1, PASSWORD_HASH_ITERATIONS_MAX]."""
    if not isinstance(password, str) or not password:
        raise InvalidArgumentError("a password must be a non-empty str")
    if (
        isinstance(iterations, bool)
        or not isinstance(iterations, int)
        or not 1 <= iterations <= PASSWORD_HASH_ITERATIONS_MAX
    ):
        raise InvalidArgumentError(
            f"iterations must be an int in [1, {PASSWORD_HASH_ITERATIONS_MAX}], got {iterations!r}"
        )
    salt = os.urandom(_SALT_BYTES) if salt is None else salt
    digest = hashlib.pbkdf2_hmac(
        "sha256", password.encode("utf-8"), salt, iterations, dklen=_HASH_BYTES
    )
    return f"{iterations}:{salt.hex()}:{digest.hex()}".encode("ascii").hex()


def _parse_hash(encoded: str) -> tuple[int, bytes, bytes]:
    """(iterations, salt, hash) of a stored hash; ValueError if it is not one."""
    iterations, salt, digest = bytes.fromhex(encoded).decode("ascii").split(":")
    count = int(iterations)
    if not 1 <= count <= PASSWORD_HASH_ITERATIONS_MAX:
        raise ValueError("iterations out of range")
    salt_bytes, digest_bytes = bytes.fromhex(salt), bytes.fromhex(digest)
    if not salt_bytes or not digest_bytes:
        raise ValueError("empty salt or hash")
    return count, salt_bytes, digest_bytes


def check_password(password: str, encoded: str) -> bool:
    """Whether ``password`` is the one ``encoded`` (:func:`hash_password`'s format) was made
    from; compared in constant time. False for a malformed ``encoded``."""
    try:
        iterations, salt, digest = _parse_hash(encoded)
    except (ValueError, UnicodeDecodeError):
        return False
    tried = hashlib.pbkdf2_hmac(
        "sha256", password.encode("utf-8"), salt, iterations, dklen=len(digest)
    )
    return hmac.compare_digest(tried, digest)


# --- access control lists ------------------------------------------------------------------------
def _pattern_regex(pattern: str) -> re.Pattern[str]:
    """``*`` (or ``.*``) matches any run of characters; everything else is literal."""
    pieces = pattern.replace(".*", "*").split("*")
    return re.compile(".*".join(re.escape(piece) for piece in pieces))


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """One entry of an ACL: a resource pattern and the permission it grants."""

    pattern: str
    permission: Permission
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.pattern.startswith(_DOMAIN):
            raise InvalidArgumentError(
                f"an ACL resource starts with {_DOMAIN!r} (Pravega's new ACL format), "
                f"got {self.pattern!r}"
            )
        object.__setattr__(self, "_regex", _pattern_regex(self.pattern))

    def matches(self, resource: str) -> bool:
        """Whether the pattern matches the whole of ``resource``."""
        return self._regex.fullmatch(resource) is not None


def parse_acl(text: str) -> tuple[AccessControlEntry, ...]:
    """The entries of an ACL string (``prn::/scope:a,READ_UPDATE;prn::*,READ``; a trailing
    ``;`` and blanks around the parts are allowed; "" is no entry). InvalidArgumentError
    for an entry that is not ``<prn::pattern>,<NONE|READ|READ_UPDATE>``."""
    entries = []
    for piece in text.strip().split(";"):
        if not piece.strip():
            continue
        parts = piece.split(",")
        if len(parts) != 2 or not parts[0].strip():
            raise InvalidArgumentError(
                f"an ACL entry is <resource>,<permission>, got {piece.strip()!r}"
            )
        name = parts[1].strip()
        if name not in Permission.__members__:
            raise InvalidArgumentError(
                f"a permission is NONE, READ or READ_UPDATE, got {name!r} in {piece.strip()!r}"
            )
        entries.append(AccessControlEntry(parts[0].strip(), Permission[name]))
    return tuple(entries)


def _check_user_name(user: object) -> str:
    if (
        not isinstance(user, str)
        or not user
        or user != user.strip()
        or user.startswith("#")
        or any(c in user for c in ":\r\n")
    ):
        raise InvalidArgumentError(
            f"a user name is a non-empty str without ':', line breaks, surrounding blanks or "
            f"a leading '#', got {user!r}"
        )
    return user


def password_file_entry(
    user: str, password: str, acl: str, *, iterations: int = PASSWORD_HASH_ITERATIONS
) -> str:
    """One line of a password file (no line break): ``<user>:<hash>:<acl>``.
    InvalidArgumentError for a bad user name, password or ACL."""
    _check_user_name(user)
    parse_acl(acl)
    if "\n" in acl or "\r" in acl:
        raise InvalidArgumentError("an ACL is one line")
    return f"{user}:{hash_password(password, iterations=iterations)}:{acl.strip()}"


@dataclass(frozen=True, slots=True)
class UserAccount:
    """A user of a password file: its name, password hash and ACL."""

    name: str
    password_hash: str = field(repr=False)
    acl: tuple[AccessControlEntry, ...]

    def permission(self, resource: str) -> Permission:
        """What the first entry matching ``resource`` grants; NONE if none does."""
        for entry in self.acl:
            if entry.matches(resource):
                return entry.permission
        return Permission.NONE


@dataclass(frozen=True)
class PasswordFile:
    """A loaded password file (module docstring): ``users`` by name."""

    path: str
    users: Mapping[str, UserAccount] = field(repr=False)

    @classmethod
    def parse(cls, path: str, text: str) -> PasswordFile:
        """The users of ``text`` (the content of ``path``). ConfigurationError naming the file
        and line of a malformed entry (never its content: it holds a hash), a user named
        twice, or a file with no user."""
        users: dict[str, UserAccount] = {}
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            parts = line.split(":", 2)
            where = f"password file {path}, line {number}"
            if len(parts) < 2:
                raise ConfigurationError(f"{where}: not <user>:<password hash>:<acl>")
            try:
                user = _check_user_name(parts[0])
                _parse_hash(parts[1])
                acl = parse_acl(parts[2] if len(parts) == 3 else "")
            except InvalidArgumentError as e:
                raise ConfigurationError(f"{where}: {e.message}") from None
            except (ValueError, UnicodeDecodeError):
                raise ConfigurationError(
                    f"{where}: the password hash is not hex(<iterations>:<hex salt>:<hex hash>) "
                    "(pravega_ray.auth.hash_password writes one)"
                ) from None
            if user in users:
                raise ConfigurationError(f"{where}: user {user!r} is named twice")
            users[user] = UserAccount(user, parts[1], acl)
        if not users:
            raise ConfigurationError(f"password file {path} names no user")
        return cls(path, users)

    @classmethod
    def read_bytes(cls, path: str) -> bytes:
        """The file's bytes; ConfigurationError naming it if it cannot be read or is over
        4 MiB."""
        try:
            with open(path, "rb") as file:
                data = file.read(_PASSWORD_FILE_BYTES_MAX + 1)
        except OSError as e:
            raise ConfigurationError(
                f"cannot read the password file {path}: {e.strerror or e}"
            ) from None
        if len(data) > _PASSWORD_FILE_BYTES_MAX:
            raise ConfigurationError(f"password file {path} is over 4 MiB")
        return data

    @classmethod
    def load(cls, path: str) -> PasswordFile:
        """Read and parse ``path`` (UTF-8). ConfigurationError as :meth:`parse` and
        :meth:`read_bytes` say."""
        return cls.parse(path, cls.decode(path, cls.read_bytes(path)))

    @staticmethod
    def decode(path: str, data: bytes) -> str:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise ConfigurationError(f"password file {path} is not UTF-8") from None


# --- delegation tokens ---------------------------------------------------------------------------
def derive_token_secret(*materials: bytes) -> bytes:
    """A 32-byte signing secret derived from ``materials`` (the bytes of files every endpoint
    reads: the password file, the TLS key), so every process serving the endpoints derives
    the same one without it being passed around (docs/security.md). InvalidArgumentError
    without material."""
    if not materials or not any(materials):
        raise InvalidArgumentError("a token secret needs some secret material")
    digest = hashlib.sha256()
    for material in materials:
        digest.update(len(material).to_bytes(8, "big"))
        digest.update(hashlib.sha256(material).digest())
    return hmac.new(b"pravega-ray delegation tokens v1", digest.digest(), "sha256").digest()


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64url_decode(text: str) -> bytes:
    """Decodes base64url with or without padding (also the standard alphabet's output for
    our payloads, which is the same). ValueError for bad input."""
    if not text.isascii():
        raise ValueError("not base64")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error as e:
        raise ValueError(str(e)) from None


_UNSAFE_CHARACTERS = {">": "\\u003e", "?": "\\u003f", "~": "\\u007e"}


def _jwt_safe_json(claims: Mapping[str, object]) -> bytes:
    """``claims`` as JSON whose base64 is the same in the standard and the URL-safe alphabet,
    without padding.

    The official client (Rust ``pravega-client-auth``) decodes a token's payload with
    ``base64::decode``, the standard alphabet with padding. Every 3 bytes of ASCII encode to
    4 characters; only the last 6 bits of the third byte can reach 62 or 63 (``+``/``-`` and
    ``/``/``_``), and only for ``>``, ``?``, ``~`` and DEL. JSON escapes DEL and everything
    beyond ASCII (``ensure_ascii``); the other three appear only inside strings and are
    escaped here. Trailing blanks pad the text to a multiple of 3 bytes, so no ``=`` is due.
    """
    text = json.dumps(claims, separators=(",", ":"), ensure_ascii=True)
    for character, escape in _UNSAFE_CHARACTERS.items():
        text = text.replace(character, escape)
    text += " " * (-len(text) % 3)
    return text.encode("ascii")


class TokenStatus(enum.Enum):
    """What a token check found."""

    VALID = "valid"
    EXPIRED = "expired"
    INVALID = "invalid"


@dataclass(frozen=True, slots=True)
class TokenCheck:
    """The outcome of :meth:`DelegationTokens.check`: ``status``, the token's user when it
    was signed by us, and why it was refused (safe to send back: it names no secret)."""

    status: TokenStatus
    user: str = ""
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.status is TokenStatus.VALID


class DelegationTokens:
    """Issues and checks delegation tokens (module docstring), signed with ``secret``
    (at least 32 bytes), good for ``ttl_s`` seconds by ``clock`` (Unix seconds; injectable
    for tests). The secret never appears in ``repr`` or any message."""

    def __init__(
        self,
        secret: bytes,
        *,
        ttl_s: int = DELEGATION_TOKEN_TTL_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(secret, bytes) or len(secret) < _TOKEN_SECRET_BYTES_MIN:
            raise InvalidArgumentError(
                f"a token secret is bytes, at least {_TOKEN_SECRET_BYTES_MIN} of them"
            )
        if isinstance(ttl_s, bool) or not isinstance(ttl_s, int) or not 10 <= ttl_s <= 86_400:
            raise InvalidArgumentError(f"ttl_s must be an int in [10, 86400], got {ttl_s!r}")
        self._secret = secret
        self._ttl_s = ttl_s
        self._clock = clock
        self._header = _b64url(json.dumps(_JWT_HEADER, separators=(",", ":")).encode())

    def __repr__(self) -> str:
        return f"DelegationTokens(ttl_s={self._ttl_s})"

    def _signature(self, signed: str) -> bytes:
        return hmac.new(self._secret, signed.encode("ascii"), "sha256").digest()

    def issue(self, user: str, resource: str, permission: Permission) -> str:
        """A token letting ``user`` use ``resource`` with ``permission`` until
        ``now + ttl_s``. InvalidArgumentError for NONE."""
        if permission is Permission.NONE:
            raise InvalidArgumentError("a delegation token grants READ or READ_UPDATE")
        now = int(self._clock())
        claims = {
            "sub": user,
            "aud": _TOKEN_AUDIENCE,
            "iat": now,
            "exp": now + self._ttl_s,
            "res": resource,
            "perm": permission.name,
        }
        signed = f"{self._header}.{_b64url(_jwt_safe_json(claims))}"
        return f"{signed}.{_b64url(self._signature(signed))}"

    def check(self, token: str, requirements: Mapping[str, Permission]) -> TokenCheck:
        """Whether ``token`` is ours, unexpired, and names one of the resources of
        ``requirements`` with at least the permission it maps to there
        (:func:`segment_requirements`). The signature is checked first, in constant time;
        nothing in an unsigned token is trusted. Never raises."""
        if not token:
            return TokenCheck(TokenStatus.INVALID, reason="the request carries no delegation token")
        if len(token) > _TOKEN_BYTES_MAX or not token.isascii():
            return TokenCheck(TokenStatus.INVALID, reason="the delegation token is malformed")
        parts = token.split(".")
        if len(parts) != 3:
            return TokenCheck(TokenStatus.INVALID, reason="the delegation token is malformed")
        try:
            signature = _b64url_decode(parts[2])
        except ValueError:
            return TokenCheck(TokenStatus.INVALID, reason="the delegation token is malformed")
        if not hmac.compare_digest(signature, self._signature(f"{parts[0]}.{parts[1]}")):
            return TokenCheck(TokenStatus.INVALID, reason="the delegation token is not signed here")
        try:
            claims = json.loads(_b64url_decode(parts[1]))
            user, resource, granted = claims["sub"], claims["res"], Permission[claims["perm"]]
            expires, audience = claims["exp"], claims["aud"]
        except (ValueError, KeyError, TypeError):
            return TokenCheck(TokenStatus.INVALID, reason="the delegation token is malformed")
        if (
            audience != _TOKEN_AUDIENCE
            or not isinstance(expires, int)
            or not isinstance(user, str)
            or not isinstance(resource, str)
        ):
            return TokenCheck(TokenStatus.INVALID, reason="the delegation token is malformed")
        if expires <= self._clock():
            return TokenCheck(TokenStatus.EXPIRED, user, "the delegation token has expired")
        needed = requirements.get(resource)
        if needed is None:
            wanted = next(iter(requirements), "")
            return TokenCheck(
                TokenStatus.INVALID, user, f"the delegation token is not for {wanted}"
            )
        if granted < needed:
            return TokenCheck(
                TokenStatus.INVALID,
                user,
                f"the delegation token grants {granted.name} on {resource}: "
                f"{needed.name} is needed",
            )
        return TokenCheck(TokenStatus.VALID, user)


# --- a server's access control -------------------------------------------------------------------
class AccessControl:
    """What a server checks: who a caller is and what it may do (module docstring).

    :meth:`authenticate` checks an ``authorization`` header against ``passwords``; a
    credential found good is remembered (at most 1,024, keyed by an HMAC of it under a
    per-process random key, so no password is kept), since checking a password costs
    PBKDF2's rounds. Thread-safe.
    """

    def __init__(self, passwords: PasswordFile, tokens: DelegationTokens) -> None:
        self.passwords = passwords
        self.tokens = tokens
        self._cache_key = os.urandom(32)
        self._checked: collections.OrderedDict[bytes, str] = collections.OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"AccessControl({self.passwords.path}, {len(self.passwords.users)} users)"

    def authenticate(self, authorization: str | None) -> str | None:
        """The user an ``authorization`` value (``Basic base64(user:password)``, Pravega's
        ``PasswordAuthHandler``) names, if its password is right; None otherwise (absent,
        another scheme such as Bearer, malformed, unknown user, wrong password)."""
        if not authorization or len(authorization) > _CREDENTIALS_BYTES_MAX:
            return None
        scheme, _, credentials = authorization.strip().partition(" ")
        if scheme.lower() != "basic" or not credentials.strip():
            return None
        key = hmac.new(self._cache_key, credentials.strip().encode(), "sha256").digest()
        with self._lock:
            user = self._checked.get(key)
            if user is not None:
                self._checked.move_to_end(key)
                return user
        try:
            decoded = base64.b64decode(credentials.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        name, colon, password = decoded.partition(":")
        account = self.passwords.users.get(name)
        if not colon or account is None or not check_password(password, account.password_hash):
            return None
        with self._lock:
            self._checked[key] = name
            while len(self._checked) > _CREDENTIAL_CACHE_ENTRIES_MAX:
                self._checked.popitem(last=False)
        return name

    def permission(self, user: str, resource: str) -> Permission:
        """What ``user`` may do on ``resource`` (NONE for an unknown user)."""
        account = self.passwords.users.get(user)
        return Permission.NONE if account is None else account.permission(resource)

    def allows(self, user: str, resource: str, needed: Permission) -> bool:
        """Whether ``user`` has at least ``needed`` on ``resource``."""
        return self.permission(user, resource) >= needed

    def stream_access(self, user: str, scope: str, stream: str) -> tuple[str, Permission]:
        """The resource a delegation token for ``scope/stream`` names, and what it grants:
        for a reader group's state stream (``<group>_kvtable``) the reader group's resource
        when the user may read the group, else the stream's resource; with what the user may
        do there (NONE: no token)."""
        group = reader_group_of_state_stream(stream)
        if group is not None:
            resource = reader_group_resource(scope, group)
            granted = self.permission(user, resource)
            if granted >= Permission.READ:
                return resource, granted
        resource = stream_resource(scope, stream)
        return resource, self.permission(user, resource)


def segment_requirements(segment: str, *, mutation: bool, table: bool) -> dict[str, Permission]:
    """What a wire request on ``segment`` needs from its delegation token: resource -> the
    least permission it must grant there. The segment's stream, READ_UPDATE for a
    ``mutation`` and READ otherwise; for a ``table`` request on a reader group's state stream
    (``<group>_kvtable``) the group's resource with READ will do too (a reader that may read
    the group keeps its state, as Pravega's
    ``controller.security.rg.writes.with.read.permissions.enable`` allows).
    InvalidNameError for a name that is no segment's."""
    scope, stream = segment_stream(segment)
    needed = Permission.READ_UPDATE if mutation else Permission.READ
    requirements = {stream_resource(scope, stream): needed}
    group = reader_group_of_state_stream(stream)
    if table and group is not None:
        requirements[reader_group_resource(scope, group)] = Permission.READ
    return requirements
