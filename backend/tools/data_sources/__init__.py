"""Read-only data sources: the databases a user registered, queried on connections the
server holds, and their catalogs.

`query.py` holds what every reader shares (an address, limits, a capped copy of the
answer as an Arrow stream); `postgres.py` and `mysql.py` read network databases;
`files.py` reads SQLite and DuckDB files in a confined helper process; `catalog.py` is
what the agents read about a source; `readers.py` holds the connections.
"""
