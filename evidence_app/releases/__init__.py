"""Releases: what a maintainer declares qualified (``declare``), and whether each profile it
claims is qualified by the evidence, as AICR's operator support policy defines it
(``status``: the one place the rule lives)."""
