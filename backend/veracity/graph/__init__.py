"""The fixed LangGraph pipeline: route → plan → retrieve ×N → retrieve_merge → synthesize ×N →
synthesize_merge → compose → verify → decide (→ compose, bounded)."""
