"""amcp.cli."""
