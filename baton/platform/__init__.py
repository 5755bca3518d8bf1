"""Platform decisions in plain Python: what the Dagster sensors raise, without Dagster."""
