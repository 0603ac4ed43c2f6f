"""amcp.session."""
