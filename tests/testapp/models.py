"""Models the tests write to (fenced writes, idempotent tasks)."""
