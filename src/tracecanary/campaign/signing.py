"""Signed manifests: an ed25519 signature over a manifest's bytes in a DSSE envelope.

The envelope is the in-toto Dead Simple Signing Envelope
(https://github.com/secure-systems-lab/dsse): ``{"payloadType", "payload" (base64 of
the manifest file's exact bytes), "signatures": [{"keyid", "sig"}]}``; the signature is
over ``PAE(payloadType, payload)``. Primitives come from ``cryptography``; nothing here
implements one.

Guarantees: ``verify_envelope`` returns the key id only when the envelope's payload is
byte for byte the manifest given and one of its signatures verifies under the public
key given; a wrong key, a changed manifest or a changed envelope, or a manifest or
envelope that is a symlink, is ``ClaimFailed`` (exit 1); an unreadable key or envelope
is ``InputError`` (exit 2). A key id is the SHA-256 of the raw 32-byte public key, in
hex: what a lab publishes beside its key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from tracecanary.canonical import canonical_json_bytes, write_bytes_atomic
from tracecanary.errors import ClaimFailed, InputError
from tracecanary.formats.ids import MANIFEST_FORMAT
from tracecanary.limits import load_json, read_input

PAYLOAD_TYPE = f"application/vnd.tracecanary+json; format={MANIFEST_FORMAT}"
ENVELOPE_SUFFIX = ".dsse.json"
MAX_KEY_BYTES = 16 << 10


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding: ``DSSEv1 SP LEN(type) SP type SP LEN(body) SP body``."""
    kind = payload_type.encode("utf-8")
    return b"DSSEv1 %d %s %d %s" % (len(kind), kind, len(payload), payload)


def key_id(public_key: Ed25519PublicKey) -> str:
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()


def _read_key_bytes(path: str | os.PathLike) -> bytes:
    p = Path(path)
    if not p.is_file():
        raise InputError("no such key file", file=str(path))
    if p.stat().st_size > MAX_KEY_BYTES:
        raise InputError(f"a key file is at most {MAX_KEY_BYTES} bytes", file=str(path))
    return p.read_bytes()


def load_private_key(path: str | os.PathLike) -> Ed25519PrivateKey:
    """An unencrypted PEM (PKCS#8) ed25519 private key."""
    try:
        key = serialization.load_pem_private_key(_read_key_bytes(path), password=None)
    except (ValueError, TypeError) as err:
        raise InputError(f"not an unencrypted PEM private key: {err}", file=str(path)) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError("not an ed25519 private key", file=str(path))
    return key


def load_public_key(path: str | os.PathLike) -> Ed25519PublicKey:
    """A PEM ed25519 public key, or the public half of a PEM ed25519 private key."""
    data = _read_key_bytes(path)
    try:
        key = serialization.load_pem_public_key(data)
    except (ValueError, TypeError):
        try:
            key = serialization.load_pem_private_key(data, password=None).public_key()
        except (ValueError, TypeError) as err:
            raise InputError(f"not a PEM public key: {err}", file=str(path)) from None
    if not isinstance(key, Ed25519PublicKey):
        raise InputError("not an ed25519 public key", file=str(path))
    return key


def generate_key(private_path: str | os.PathLike, *, force: bool = False) -> tuple[Path, str]:
    """Write a new ed25519 key pair: ``private_path`` (PEM PKCS#8, mode 0600 from its
    first byte) and ``private_path.pub`` (PEM); return (public key path, key id).

    An existing key file (either of the pair) is refused unless ``force``; anything that
    is not a regular file is always refused (InputError, exit 2). On any refusal or
    write error neither file is written: the private key is renamed into place only
    after the public one is."""
    from tracecanary.canonical import atomic_output, check_output_target

    private_target = Path(private_path)
    public_path = Path(f"{private_path}.pub")
    existed = {}
    for target in (private_target, public_path):
        check_output_target(target, directory=False)
        existed[target] = target.exists()
        if existed[target] and not force:
            raise InputError(
                "a key file already exists; refusing to overwrite it (pass --force to "
                "replace the key pair)",
                file=str(target),
                field="--output",
            )
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    wrote_public = False
    try:
        with atomic_output(private_target, mode=0o600) as tmp:
            tmp.write_bytes(private)
            write_bytes_atomic(public_path, public)
            wrote_public = True
    except BaseException as err:
        if wrote_public and not existed[public_path]:
            public_path.unlink(missing_ok=True)
        if isinstance(err, OSError):
            where = str(err.filename or private_path)
            raise InputError(f"cannot write the key pair: {err.strerror}", file=where) from None
        raise
    return public_path, key_id(key.public_key())


def default_envelope_path(manifest_path: str | os.PathLike) -> Path:
    return Path(f"{manifest_path}{ENVELOPE_SUFFIX}")


def sign_manifest(
    manifest_path: str | os.PathLike, key_path: str | os.PathLike, output: str | os.PathLike
) -> str:
    """Write the DSSE envelope of the manifest's exact bytes signed with the key; return
    the key id. The manifest is loaded (and so checked) first."""
    from tracecanary.campaign.operations import load_manifest

    load_manifest(manifest_path)
    key = load_private_key(key_path)
    payload = read_input(manifest_path)
    kid = key_id(key.public_key())
    envelope = {
        "payloadType": PAYLOAD_TYPE,
        "payload": base64.b64encode(payload).decode("ascii"),
        "signatures": [
            {"keyid": kid, "sig": base64.b64encode(key.sign(pae(PAYLOAD_TYPE, payload))).decode()}
        ],
    }
    write_bytes_atomic(output, canonical_json_bytes(envelope))
    return kid


def _b64(text: object, *, file: str, field: str) -> bytes:
    if not isinstance(text, str):
        raise InputError("must be a base64 string", file=file, field=field)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise InputError("not valid base64", file=file, field=field) from None


def verify_envelope(
    manifest_path: str | os.PathLike,
    public_key_path: str | os.PathLike,
    envelope_path: str | os.PathLike | None = None,
) -> str:
    """The key id of a signature in the envelope that verifies over exactly the
    manifest's bytes (see module doc)."""
    envelope_path = envelope_path or default_envelope_path(manifest_path)
    file = str(envelope_path)
    for given in (manifest_path, envelope_path):
        if Path(given).is_symlink():  # it would vouch for the link's target, not this one
            raise ClaimFailed("is a symlink: a signature is checked where it lies", file=str(given))
    envelope = load_json(envelope_path)
    if not isinstance(envelope, dict) or not isinstance(envelope.get("signatures"), list):
        raise InputError("not a DSSE envelope", file=file, field="signatures")
    if envelope.get("payloadType") != PAYLOAD_TYPE:
        raise InputError(f"payloadType is not {PAYLOAD_TYPE!r}", file=file, field="payloadType")
    payload = _b64(envelope.get("payload"), file=file, field="payload")
    key = load_public_key(public_key_path)
    kid = key_id(key)
    if payload != read_input(manifest_path):
        raise ClaimFailed(
            "the signed payload is not this manifest's bytes", file=str(manifest_path)
        )
    for index, signature in enumerate(envelope["signatures"]):
        if not isinstance(signature, dict):
            raise InputError("a signature is an object", file=file, field=f"signatures[{index}]")
        sig = _b64(signature.get("sig"), file=file, field=f"signatures[{index}].sig")
        try:
            key.verify(sig, pae(PAYLOAD_TYPE, payload))
        except InvalidSignature:
            continue
        return kid
    raise ClaimFailed(f"no signature verifies under key {kid}", file=file)
