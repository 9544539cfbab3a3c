"""Operators' commands on a server's stored data: `python -m backend.admin backup|restore`.

They read the same settings as the server (`backend.config.load_settings`) and work on
DATA_DIR and the database directly, never through the API; docs/operations.md says how
to run them.
"""
