"""amcp.amql."""
