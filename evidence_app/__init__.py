"""Signed validation evidence: verification, signers, consensus and staleness."""
