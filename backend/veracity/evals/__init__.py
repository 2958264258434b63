"""Offline evaluation harnesses over third-party datasets read by path (never copied into the project)."""
