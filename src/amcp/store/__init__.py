"""amcp.store."""
