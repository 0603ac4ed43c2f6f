"""amcp.agent."""
