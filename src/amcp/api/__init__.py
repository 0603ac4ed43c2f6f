"""amcp.api."""
