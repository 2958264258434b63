"""Local corpora: reading user files and the bundled Wikipedia lead sections into documents and chunks."""
