"""``python -m evidence_app.corroborate -in <tree> -out <dir> [-allowlist <allowlist.yaml>]``."""

from __future__ import annotations

from .generate import main

if __name__ == "__main__":
    main()
