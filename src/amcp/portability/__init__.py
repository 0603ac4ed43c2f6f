"""amcp.portability."""
