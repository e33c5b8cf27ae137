"""Rendering: rich tables for the terminal, JSON for machines."""
