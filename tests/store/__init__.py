"""Conformance suite of the SQL store: every test runs against SQLite and PostgreSQL."""
