"""Runs: executing the graph, persisting events and artifacts, and reducing events into a view."""
