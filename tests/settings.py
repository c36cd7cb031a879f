"""The one settings module of the test suite.

The Redis aliases below point at a port nothing listens on; the session
fixture in ``conftest.py`` overrides them with the test's own server, so a
test that escaped the fixtures fails loudly instead of touching a real Redis.
"""

import sys
from pathlib import Path

# The example shop's app (``shop``) is tested here too: its project folder is importable.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "example_project"))

SECRET_KEY = "tests-only-not-secret"
DEBUG = True
USE_TZ = True
ROOT_URLCONF = "tests.urls"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
ALLOWED_HOSTS = ["*"]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_redislock",
    "tests.testapp",
    "shop",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

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

DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "test.sqlite3"}}
STATIC_URL = "/static/"

UNREACHABLE = "redis://127.0.0.1:1/0"
REDISLOCK_LOCKS = {"default": {"LOCATION": UNREACHABLE}}
REDISLOCK_QUEUES = {"default": {"LOCATION": UNREACHABLE}}

# Django's tasks framework (django.tasks on Django 6, the django-tasks backport before): the
# calls in tests/djtasks.py run on this app's queue (ignored where neither is installed).
TASKS = {
    "default": {
        "BACKEND": "django_redislock.contrib.tasks.RedisTaskBackend",
        "QUEUES": ["default", "django-tasks"],
    }
}
