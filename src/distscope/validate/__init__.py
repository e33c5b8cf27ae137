"""Validation against published runs (data/validation/README.md CSV contract)."""
