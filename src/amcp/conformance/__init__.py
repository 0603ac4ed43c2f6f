"""amcp.conformance."""
