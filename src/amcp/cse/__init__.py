"""amcp.cse."""
