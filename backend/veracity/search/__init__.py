"""Search providers (one protocol) and evidence extraction from what they return."""
