"""amcp.amf."""
