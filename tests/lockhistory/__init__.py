"""A Jepsen-style history check of the locks under faults (issue 23).

``worker`` runs random lock operations in a process and appends what it saw to a history
file; ``run`` starts the servers, the workers and the faults and collects the histories;
``checker`` verifies a history (pure Python, no Redis). ``python3 dev.py soak locks`` and
``tests/test_lock_history.py`` drive ``run``.
"""
