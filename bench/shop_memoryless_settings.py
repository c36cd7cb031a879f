"""The example shop's settings with the local sold-out memory bypassed (``bench shop_sold_out``).

The shop as it was before the local sold-out flag: every buyer of a sold-out sale runs the
take script in Redis (which answers sold out at its top). Nothing here is for production:
the bench compares this against the shop's own settings, flag on.
"""

from shopsite.settings import *  # noqa: F403

from django_redislock.inventory import sold_out


def _forget_every_answer(*args: object, **kwargs: object) -> None:
    """Remember nothing: the next take asks Redis again."""


sold_out.memory.remember = _forget_every_answer  # type: ignore[method-assign]
