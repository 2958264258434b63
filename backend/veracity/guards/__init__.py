"""Guards that check generated text against its cited sources."""
