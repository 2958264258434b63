"""Composers: turn per-section evidence into an anchored draft. Extractive offline; scripted or model-backed."""
