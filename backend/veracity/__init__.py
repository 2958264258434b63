"""Veracity: a research desk whose every shipped sentence is tied to a retrieved source span."""

__version__ = "0.1.0"
