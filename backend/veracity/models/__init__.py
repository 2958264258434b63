"""Language models behind one contract: an OpenAI-compatible chat client with budgets, usage and a circuit."""
