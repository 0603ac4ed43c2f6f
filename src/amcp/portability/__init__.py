"""Import/export and importers for other tools."""
