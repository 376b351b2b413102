"""Evidence workflows (verify-before-count ingest, signers and the allowlist, keys, trusted
roots, tokens, withdrawal, OCI pulls, staleness, demo data). Views and tasks call these."""
