"""The example shop's settings (see the package docstring for the environment variables)."""

from __future__ import annotations

import os
from pathlib import Path

from .database import parse, sqlite

PROJECT_DIR = Path(__file__).resolve().parent.parent.parent
DATA_DIR = Path(os.environ.get("SHOP_DATA_DIR", PROJECT_DIR / "var")).resolve()

SECRET_KEY = os.environ.get("SHOP_SECRET_KEY", "example-shop-not-secret")
DEBUG = os.environ.get("SHOP_DEBUG", "1") == "1"
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
ROOT_URLCONF = "shopsite.urls"
WSGI_APPLICATION = "shopsite.wsgi.application"
STATIC_URL = "/static/"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_redislock",
    "shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # no page of this site may be framed: a frame on a same-site page could click the
    # admin's purge and release buttons for a logged-in operator
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]
X_FRAME_OPTIONS = "DENY"

# the dashboard's flash-sale panel watches the stocks of current sales
REDISLOCK_ADMIN_STOCKS = "shop.panel.live_stocks"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]

DATABASES = {
    "default": parse(os.environ["DATABASE_URL"])
    if os.environ.get("DATABASE_URL")
    else sqlite(DATA_DIR / "db.sqlite3")
}

# One private Redis for locks and queues (embedded:// is for development and demos only).
REDIS_LOCATION = os.environ.get("SHOP_REDIS_URL") or f"embedded://{DATA_DIR / 'redis'}"
#: ``SHOP_REDIS_CLUSTER=1``: ``SHOP_REDIS_URL`` is a Redis Cluster node (``demo.py --cluster``).
REDIS_CLUSTER = {"CLUSTER": True} if os.environ.get("SHOP_REDIS_CLUSTER") == "1" else {}
REDISLOCK_LOCKS = {
    "default": {"LOCATION": REDIS_LOCATION, "KEY_PREFIX": "shop", "OPTIONS": {**REDIS_CLUSTER}}
}
REDISLOCK_QUEUES = {
    "default": {
        "LOCATION": REDIS_LOCATION,
        "KEY_PREFIX": "shop",
        "OPTIONS": {"VISIBILITY_TIMEOUT": 30.0, "MAX_ATTEMPTS": 5, **REDIS_CLUSTER},
    }
}

#: Seconds a buyer has to pay before the order expires and its unit goes back on sale.
SHOP_PAY_WITHIN = float(os.environ.get("SHOP_PAY_WITHIN", "900"))

# A flash sale answers most requests with 409 (sold out, already bought): that is business as
# usual, not a warning worth a log line per request.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "loggers": {"django.request": {"level": "ERROR"}},
}
