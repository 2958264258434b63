"""HTTP edge: the JSON/SSE API, the pages, and the one place events become SSE messages."""
