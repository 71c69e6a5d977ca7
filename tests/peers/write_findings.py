"""Regenerates results/peers/README.md from the JSON findings beside it (placeholder)."""
