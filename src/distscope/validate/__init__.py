"""Validation against published runs (shared/validation/README.md CSV contract)."""
