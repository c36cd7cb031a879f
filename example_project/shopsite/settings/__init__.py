"""Settings of the example shop: everything in :mod:`.base`, tuned by environment variables.

``SHOP_DATA_DIR``   where the SQLite database and the embedded Redis live (default ``var/``)
``DATABASE_URL``    ``postgres://user:pass@host:port/name`` to use PostgreSQL instead of SQLite
``SHOP_REDIS_URL``  a Redis URL instead of the embedded server (``redis://127.0.0.1:6379/0``)
``SHOP_REDIS_CLUSTER`` ``1``: ``SHOP_REDIS_URL`` is a node of a Redis Cluster
``SHOP_PAY_WITHIN`` seconds a buyer has to pay before the order expires (default 900)
``SHOP_DEBUG``      ``0`` to run with ``DEBUG = False``
"""

from .base import *  # noqa: F403
