"""Lock and queue backends: the base contract and its Redis implementations."""
