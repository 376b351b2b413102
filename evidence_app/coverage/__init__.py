"""Snapshot checks ("does the evidence cover my cluster?") and the qualification ledger."""
