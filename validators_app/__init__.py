"""GPU clusters and validation runs against them (not built yet)."""
