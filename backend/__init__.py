"""Chat server whose agents write and run Python on the user's data."""
