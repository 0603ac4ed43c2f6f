"""amcp.wire."""
