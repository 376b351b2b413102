"""Copy-paste verify commands for auditors, built from VERIFIED values only.

Every value comes from a successful verification (the pinned identity and issuer of the
verified certificate, the predicateType of the verified payload) and every argument is
``shlex.quote``d, so a hostile identity (quotes, ``$(…)``, backticks, ``;``, newlines) stays one
argument. File names are fixed by the caller (defaults: ``evidence.sigstore.json``,
``recipe.yaml``). A value that starts with ``-`` is passed as ``--flag=value`` so no tool can
read it as an option.

Forms (SIGSTORE.md §4):
* ``aicr evidence verify <input> --expected-issuer ISS --expected-identity-regexp '^…$'`` —
  AICR recipe evidence under the production root only (aicr has no private-root flag);
* ``cosign verify-blob-attestation --bundle B --new-bundle-format --certificate-identity ID
  --certificate-oidc-issuer ISS --type PREDICATE_TYPE [--trusted-root trusted_root.json]
  [--use-signed-timestamps] ARTIFACT`` (``cosign verify-blob`` for message signatures);
* ``python -m sigstore [--trust-config client_trust_config.json] verify identity --bundle B
  --cert-identity ID --cert-oidc-issuer ISS ARTIFACT``;
* key-signed: ``aicr evidence verify <input> --key key.pub`` (AICR v1.1+, evidence directories
  and OCI references only, as for keyless) and ``cosign verify-blob-attestation --bundle B
  --new-bundle-format --key key.pub --type PREDICATE_TYPE [--insecure-ignore-tlog] ARTIFACT``.

The ``aicr … --key`` form is NOT confirmed offline: the reviewed AICR sources (up to main-08 and
the v1.x excerpts; the team's AICR notes §4.4-4.5 and their v1 notes §9) have no ``--key`` on ``aicr
evidence verify`` (only on ``aicr verify`` for deployment bundles, ``--key <kms-uri|pub.pem>``).
It is written as AICR v1.1's KMS evidence signing (``validation.signingKey``) is described to
us, modelled on ``aicr verify``; check the flag against ``aicr evidence verify --help`` of the
release you run. Its "no Rekor" option's flag name is not known offline, so none is passed.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from .signature import SignatureOutcome
from .statement import PREDICATE_TYPES

BUNDLE_FILE = "evidence.sigstore.json"
ARTIFACT_FILE = "recipe.yaml"
KEY_FILE = "key.pub"
TRUSTED_ROOT_FILE = "trusted_root.json"
TRUST_CONFIG_FILE = "client_trust_config.json"
AICR_INPUT = "./summary-bundle"

# The one sentence for key-signed evidence, wherever its commands are shown (the evidence page,
# the API's ``verify_commands``, the audit package's README). Classification upstream keys on
# the Fulcio certificate's (issuer, SAN) in recipes/evidence/allowlist.yaml, so only keyless
# signatures can be accepted there.
KEY_SIGNED_UPSTREAM_NOTE = (
    "AICR's upstream evidence gate accepts keyless signatures only (Sigstore OIDC "
    "certificates, classified by its allowlist), so it would not accept key-signed evidence; "
    "on this site a key-signed record can count only because a maintainer registered its key."
)
AICR_KEY_LABEL = "AICR v1.1+"

# What each tool is and how to get it, shown under its command: a verify line is no use to an
# auditor who does not have the tool (cosign is often missing), so each says where it comes from.
TOOL_GUIDE: dict[str, str] = {
    "aicr": "AICR's own CLI, the tool that made the evidence: a release binary of the "
    "NVIDIA/aicr project.",
    "cosign": "Sigstore's command-line signer and verifier: a release binary of the "
    "sigstore/cosign project, or a package (e.g. brew install cosign).",
    "sigstore-python": "Sigstore's Python client, no cosign needed: pip install sigstore.",
    "manage.py": "This dashboard's own verifier (aicr evidence verify's checks on this site's "
    "trust policy), no cosign needed: run it in a checkout of the dashboard's source.",
    "openssl": "Only checks that the downloaded bytes are the ones this page lists (sha256), "
    "not who signed them; OpenSSL is on most systems.",
}

# Characters special in both Python ``re`` and Go RE2 (escaped with a backslash there).
_REGEX_SPECIAL = frozenset("\\.+*?()|[]{}^$")


@dataclass(frozen=True)
class VerifyCommand:
    tool: str  # "aicr" | "cosign" | "sigstore-python"
    argv: tuple[str, ...]
    note: str = ""

    @property
    def text(self) -> str:
        """The shell command line (each argument quoted)."""
        return " ".join(shlex.quote(arg) for arg in self.argv)


def anchored_identity_regexp(identity: str) -> str:
    """``^<identity escaped>$``, a pattern that matches exactly ``identity`` in Python ``re``
    and Go RE2 (``re.escape`` would also escape characters RE2 rejects escaped, e.g. newline)."""
    out = []
    for char in identity:
        if char in _REGEX_SPECIAL:
            out.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\x{ord(char):02x}")
        else:
            out.append(char)
    return "^" + "".join(out) + "$"


def _flag(argv: list[str], flag: str, value: str) -> None:
    if not value:
        raise ValueError(f"{flag} needs a non-empty value")
    if value.startswith("-"):
        argv.append(f"{flag}={value}")
    else:
        argv.extend((flag, value))


def _positional(value: str) -> str:
    if not value or value.startswith("-"):
        raise ValueError(f"positional argument {value!r} must not be empty or start with '-'")
    return value


def keyless_commands(
    *,
    identity: str,
    issuer: str,
    predicate_type: str | None,
    message_signature: bool = False,
    private_root: bool = False,
    rekor_v2: bool = False,
    bundle_file: str = BUNDLE_FILE,
    artifact_file: str = ARTIFACT_FILE,
    aicr_input: str | None = AICR_INPUT,
    trusted_root_file: str = TRUSTED_ROOT_FILE,
    trust_config_file: str = TRUST_CONFIG_FILE,
) -> list[VerifyCommand]:
    """Commands for a verified keyless bundle (identity and issuer as pinned and verified)."""
    commands: list[VerifyCommand] = []
    if (
        aicr_input
        and not private_root
        and not message_signature
        and predicate_type in PREDICATE_TYPES
    ):
        argv = ["aicr", "evidence", "verify", _positional(aicr_input)]
        _flag(argv, "--expected-issuer", issuer)
        _flag(argv, "--expected-identity-regexp", anchored_identity_regexp(identity))
        commands.append(VerifyCommand("aicr", tuple(argv), "the unpacked evidence directory"))

    argv = ["cosign", "verify-blob" if message_signature else "verify-blob-attestation"]
    _flag(argv, "--bundle", bundle_file)
    argv.append("--new-bundle-format")
    _flag(argv, "--certificate-identity", identity)
    _flag(argv, "--certificate-oidc-issuer", issuer)
    if not message_signature:
        if not predicate_type:
            raise ValueError("a DSSE attestation command needs the verified predicateType")
        _flag(argv, "--type", predicate_type)
    note = ""
    if private_root:
        _flag(argv, "--trusted-root", trusted_root_file)
        note = f"{trusted_root_file}: the private instance's trusted root"
    if rekor_v2:
        argv.append("--use-signed-timestamps")
    argv.append(_positional(artifact_file))
    commands.append(VerifyCommand("cosign", tuple(argv), note))

    argv = ["python", "-m", "sigstore"]
    note = ""
    if private_root:
        _flag(argv, "--trust-config", trust_config_file)
        note = f"{trust_config_file}: ClientTrustConfig wrapping the private trusted root"
    argv.extend(("verify", "identity"))
    _flag(argv, "--bundle", bundle_file)
    _flag(argv, "--cert-identity", identity)
    _flag(argv, "--cert-oidc-issuer", issuer)
    argv.append(_positional(artifact_file))
    commands.append(VerifyCommand("sigstore-python", tuple(argv), note))
    return commands


def key_commands(
    *,
    predicate_type: str | None,
    message_signature: bool = False,
    has_tlog_entry: bool = False,
    bundle_file: str = BUNDLE_FILE,
    artifact_file: str = ARTIFACT_FILE,
    key_file: str = KEY_FILE,
    aicr_input: str | None = None,
) -> list[VerifyCommand]:
    """Commands for a verified key-signed bundle (``key_file``: the registered key): ``aicr
    evidence verify --key`` (AICR v1.1+; for an evidence directory or OCI reference
    ``aicr_input`` holding AICR recipe evidence) and cosign, whose note carries
    ``KEY_SIGNED_UPSTREAM_NOTE``."""
    commands: list[VerifyCommand] = []
    if aicr_input and not message_signature and predicate_type in PREDICATE_TYPES:
        argv = ["aicr", "evidence", "verify", _positional(aicr_input)]
        _flag(argv, "--key", key_file)
        commands.append(
            VerifyCommand(
                "aicr",
                tuple(argv),
                f"{AICR_KEY_LABEL} (--key not confirmed offline: check aicr evidence verify "
                f"--help); {key_file}: the registered key",
            )
        )
    argv = ["cosign", "verify-blob" if message_signature else "verify-blob-attestation"]
    _flag(argv, "--bundle", bundle_file)
    argv.append("--new-bundle-format")
    _flag(argv, "--key", key_file)
    if not message_signature:
        if not predicate_type:
            raise ValueError("a DSSE attestation command needs the verified predicateType")
        _flag(argv, "--type", predicate_type)
    if not has_tlog_entry:
        argv.append("--insecure-ignore-tlog")
    argv.append(_positional(artifact_file))
    note = f"{key_file}: the contributor's registered key. {KEY_SIGNED_UPSTREAM_NOTE}"
    commands.append(VerifyCommand("cosign", tuple(argv), note))
    return commands


def commands_for(
    outcome: SignatureOutcome,
    *,
    predicate_type: str | None = None,
    bundle_file: str = BUNDLE_FILE,
    artifact_file: str = ARTIFACT_FILE,
    aicr_input: str | None = AICR_INPUT,
    key_file: str = KEY_FILE,
) -> list[VerifyCommand]:
    """The commands for a successful outcome; [] when it did not verify.

    ``predicate_type`` should come from the parsed, verified statement.
    """
    if not outcome.ok or outcome.signer is None:
        return []
    signer = outcome.signer
    msg = outcome.content == "message_signature"
    if signer.mode == "keyless":
        if not signer.identity or not signer.issuer:
            return []
        return keyless_commands(
            identity=signer.identity,
            issuer=signer.issuer,
            predicate_type=predicate_type,
            message_signature=msg,
            private_root=not signer.production_root,
            rekor_v2=outcome.rekor_v2,
            bundle_file=bundle_file,
            artifact_file=artifact_file,
            aicr_input=aicr_input,
        )
    return key_commands(
        predicate_type=predicate_type,
        message_signature=msg,
        has_tlog_entry=outcome.has_tlog_entry,
        bundle_file=bundle_file,
        artifact_file=artifact_file,
        key_file=key_file,
        aicr_input=aicr_input,
    )
