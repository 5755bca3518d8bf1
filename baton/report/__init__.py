"""`baton report`: the chapter's claims, tested by what Baton actually ran (docs/evidence-report.md)."""
