"""Wire schemas: what the API accepts and returns, kept apart from stored records."""
