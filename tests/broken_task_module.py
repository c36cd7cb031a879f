"""A task module that fails at import time: drain_queue must stop with an error."""

raise RuntimeError("this module is broken on purpose")
