"""amcp.retrieval."""
