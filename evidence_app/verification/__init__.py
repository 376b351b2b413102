"""Evidence verification core: Django-agnostic, offline, plain Python.

Pipeline (verify-before-count): ``bundle.parse_bundle`` → ``signature.verify_signature``
(keyless via sigstore-python against a vendored/private trusted root, or key-signed DSSE via
``cryptography``) → ``statement.parse_statement`` (AICR recipe evidence) →
``summary_bundle.read_summary_bundle`` (tarballs: manifest and CTRF digests) — each recorded in
a ``transcript.Transcript``; ``commands.commands_for`` builds auditor commands from verified
values. Binding to recipes and classifying signers are the Django app's steps.
"""

from .bundle import BundleError, ParsedBundle, parse_bundle
from .commands import VerifyCommand, anchored_identity_regexp, commands_for
from .ctrf import CtrfError, CtrfReport, CtrfTest, parse_ctrf
from .keyed import verify_keyed
from .outcome import SignatureOutcome, SignerClaims
from .signature import verify_keyless, verify_signature
from .statement import AicrStatement, StatementError, parse_statement
from .summary_bundle import SummaryBundle, SummaryBundleError, read_summary_bundle
from .transcript import Transcript, TranscriptStep
from .trust import TrustRoot, TrustRootError, load_trust_root, production_root

__all__ = [
    "AicrStatement",
    "BundleError",
    "CtrfError",
    "CtrfReport",
    "CtrfTest",
    "ParsedBundle",
    "SignatureOutcome",
    "SignerClaims",
    "StatementError",
    "SummaryBundle",
    "SummaryBundleError",
    "Transcript",
    "TranscriptStep",
    "TrustRoot",
    "TrustRootError",
    "VerifyCommand",
    "anchored_identity_regexp",
    "commands_for",
    "load_trust_root",
    "parse_bundle",
    "parse_ctrf",
    "parse_statement",
    "production_root",
    "read_summary_bundle",
    "verify_keyed",
    "verify_keyless",
    "verify_signature",
]
