"""The AICR recipe catalog: import, resolution, browsing."""
