"""Signed validation evidence: ingest, verification, signers, consensus (issue #3; not built yet)."""
