"""The web inspector: server-rendered pages over the same ``Memory`` calls as the HTTP API."""
