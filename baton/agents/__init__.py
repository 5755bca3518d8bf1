"""Reference agents and the deterministic scripted models they call."""
