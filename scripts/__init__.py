"""Repository scripts (not shipped): generators with a --check mode."""
