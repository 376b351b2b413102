"""Snapshot checks ("does the evidence cover my cluster?") and the identity tuple of evidence."""
