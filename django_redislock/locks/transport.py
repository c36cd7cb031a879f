"""The hot path of every lock call: one ``EVALSHA`` on one pooled connection.

redis-py's ``execute_command`` wraps each command in a retry closure, timing
and event hooks; on loopback that costs about 50 us of client CPU per command,
more than the lock scripts cost the server. A lock call sends the command on a
connection of the client's own pool instead (about 20 us), which is what
redis-py itself does inside the wrapper, so health checks, authentication,
Sentinel's master lookup and the pool's limits all still apply.

Whatever that path does not handle goes through ``execute_command`` as before,
so no behaviour is lost:

* a connection or timeout error: the connection is dropped and, if the
  client's retry policy allows retries at all, the call is sent again through
  ``execute_command`` under that policy (lock scripts are retry-safe);
* ``NOSCRIPT`` (a restarted or flushed server): the script is loaded and run;
* every client :func:`django_redislock.wire.direct_pool` leaves on the wrapper
  (Cluster, Sentinel, fakeredis, a custom ``CLIENT_CLASS``, a single-connection
  client, client-side caching, redis-py's OpenTelemetry metrics).
"""

from __future__ import annotations

from typing import Any

import redis

from ..wire import direct_pool  # the one rule for when the wrapper may be skipped


def _retries(conn: Any) -> int:
    """How many times the retry policy that ``execute_command`` applies on ``conn`` resends."""
    return int(getattr(getattr(conn, "retry", None), "_retries", 0) or 0)


def evalsha(script: Any, keys: list[str], args: list[Any]) -> Any:
    """Run the registered ``script`` (a redis-py ``Script``) with ``keys`` and ``args``."""
    client = script.registered_client
    pool = direct_pool(client)
    if pool is not None:
        conn = pool.get_connection()
        try:
            conn.send_command("EVALSHA", script.sha, len(keys), *keys, *args)
            reply = conn.read_response()
            reconnect = getattr(conn, "should_reconnect", None)
            if reconnect is not None and reconnect():  # a maintenance notice from the server
                conn.disconnect()
            return reply
        except redis.exceptions.NoScriptError:
            pass  # loaded and run below
        except redis.ResponseError:
            raise  # an error reply: the connection is fine
        except (redis.ConnectionError, redis.TimeoutError):
            conn.disconnect()
            if not _retries(conn):
                raise
            # sent again below, as the client's retry policy would have done
        except BaseException:
            conn.disconnect()  # e.g. KeyboardInterrupt mid-reply: the stream is unusable
            raise
        finally:
            pool.release(conn)
    try:
        return client.execute_command("EVALSHA", script.sha, len(keys), *keys, *args)
    except redis.exceptions.NoScriptError:
        return script(keys=keys, args=args)  # loads the script, then runs it
