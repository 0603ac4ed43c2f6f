"""amcp.evolution."""
