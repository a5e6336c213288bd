"""Where judgecal keeps its files and which database it uses.

Environment:
- ``JUDGECAL_HOME``: the data folder (default: the platform's user data folder, e.g.
  ``~/.local/share/judgecal`` on Linux). Holds the default SQLite database ``judgecal.db`` and
  pulled models under ``models/``.
- ``JUDGECAL_DATABASE_URL``: a SQLAlchemy URL that replaces the default SQLite database, e.g.
  ``postgresql+psycopg://postgres@127.0.0.1:5432/test``.
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

DEFAULT_MODEL_NAME = "smollm2-135m-instruct"


def home() -> Path:
    """The judgecal data folder (``JUDGECAL_HOME`` or the platform user data folder); created."""
    env = os.environ.get("JUDGECAL_HOME")
    path = Path(env).expanduser() if env else Path(platformdirs.user_data_dir("judgecal", appauthor=False))
    path.mkdir(parents=True, exist_ok=True)
    return path


def models_dir() -> Path:
    """Folder holding pulled local models: ``JUDGECAL_HOME/models``."""
    return home() / "models"


def default_model_dir() -> Path:
    """Folder of the pulled SmolLM2-135M-Instruct transformers model (may not exist yet).

    ``JUDGECAL_MODEL_DIR`` wins when set. Otherwise ``JUDGECAL_HOME/models/<name>``; when that
    does not exist but the platform user data folder holds a pulled copy (a model pulled once
    serves every JUDGECAL_HOME on the machine), that copy."""
    env = os.environ.get("JUDGECAL_MODEL_DIR")
    if env:
        return Path(env).expanduser()
    own = models_dir() / DEFAULT_MODEL_NAME
    shared = Path(platformdirs.user_data_dir("judgecal", appauthor=False)) / "models" / DEFAULT_MODEL_NAME
    if not (own / "config.json").exists() and (shared / "config.json").exists():
        return shared
    return own


def default_database_url() -> str:
    """``JUDGECAL_DATABASE_URL`` if set, else the SQLite file ``JUDGECAL_HOME/judgecal.db``."""
    env = os.environ.get("JUDGECAL_DATABASE_URL")
    if env:
        return env
    return f"sqlite:///{home() / 'judgecal.db'}"


def _resource_dir(packaged: str, top_level: str) -> Path:
    """A data folder shipped inside the wheel (``judgecal/<packaged>``) or, in a source
    checkout / editable install, the top-level folder of the repository."""
    here = Path(__file__).resolve().parent
    inside = here / packaged
    if inside.is_dir():
        return inside
    return here.parent / top_level


def migrations_dir() -> Path:
    """The Alembic script folder (top-level ``migrations/``, shipped as ``judgecal/_migrations``)."""
    return _resource_dir("_migrations", "migrations")


def prompts_dir() -> Path:
    """The judge prompt templates (top-level ``prompts/``, shipped as ``judgecal/_prompts``)."""
    return _resource_dir("_prompts", "prompts")


def shared_data_dir() -> Path:
    """The real public data sets the tests, benchmarks and ``make demo`` read:
    ``JUDGECAL_SHARED_DATA`` when set, else ``../shared/data`` beside the repository."""
    env = os.environ.get("JUDGECAL_SHARED_DATA")
    if env:
        return Path(env).expanduser()
    return Path(__file__).resolve().parent.parent.parent / "shared" / "data"
