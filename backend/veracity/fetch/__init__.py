"""Fetching web pages safely (SSRF guard, deadlines, size caps) and turning them into text."""
