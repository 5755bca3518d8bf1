"""Durable storage: a content-addressed blob store and a SQL store (SQLite or PostgreSQL)."""
