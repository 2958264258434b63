"""Meaning in every decision about what ships: the embedding model, the learned relevance of a sentence to a
question, section assignment and the selection of claims (maximal marginal relevance)."""
