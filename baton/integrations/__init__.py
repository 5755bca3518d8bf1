"""Adapters that put Baton behind other runtimes' interfaces (each needs its own optional extra)."""
