"""A small shop database on the tests' PostgreSQL: customers and their orders, and a role
that may only read them (the data source tests, API and UI alike)."""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import urlparse

import psycopg

from tests.support.postgres import PostgresServer


def shop_database(server: PostgresServer) -> dict[str, Any]:
    """Its URL (as the superuser), and what registering it as a source takes: host, port,
    database, the read-only role and its password; the superuser's name and password."""
    url = server.new_database()
    role, password = f"reader_{secrets.token_hex(4)}", secrets.token_urlsafe(12)
    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(
            "CREATE TABLE customers (id int PRIMARY KEY, name text, region text);"
            "CREATE TABLE orders (id int PRIMARY KEY, customer_id int REFERENCES customers(id),"
            " amount numeric(10, 2), placed date);"
            "INSERT INTO customers VALUES (1, 'Ada', 'north'), (2, 'Bo', 'south');"
            "INSERT INTO orders VALUES (1, 1, 10.5, '2026-01-01'), (2, 1, 20, '2026-01-02'),"
            " (3, 2, 7, '2026-01-03');"
            f"CREATE ROLE {role} LOGIN PASSWORD '{password}';"
            f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}"
        )
    parsed = urlparse(url)
    return {
        "url": url,
        "host": parsed.hostname,
        "port": parsed.port,
        "database": parsed.path.lstrip("/"),
        "username": role,
        "password": password,
        "superuser": server.user,
        "superuser_password": server.password,
    }
