"""amcp.node."""
