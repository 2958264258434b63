"""One node per module; each reads the run state and returns only the fields it owns."""
