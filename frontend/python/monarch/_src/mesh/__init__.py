"""Mesh views: affine slices of a root proc mesh (DESIGN.md §6.1)."""
