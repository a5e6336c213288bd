"""Keep secrets out of messages: API keys and database passwords are replaced by ``***``."""

from __future__ import annotations

import os
import re

from sqlalchemy.engine import make_url

_URL_PASSWORD = re.compile(r"(?P<scheme>[a-zA-Z][\w+.-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@/\s]+)@")
_QUERY_SECRET = re.compile(r"(?i)\b(password|passwd|pwd|api_key|apikey|token|secret)=([^&\s'\"]+)")


def known_secrets() -> list[str]:
    """Secret strings from the environment: ``OPENAI_API_KEY`` and the password of
    ``JUDGECAL_DATABASE_URL`` (values of 4 characters or more)."""
    out = []
    key = os.environ.get("OPENAI_API_KEY")
    if key and len(key) >= 4:
        out.append(key)
    url = os.environ.get("JUDGECAL_DATABASE_URL")
    if url:
        try:
            pw = make_url(url).password
        except Exception:  # noqa: BLE001 - an unparseable URL has no password to find
            pw = None
        if pw and len(pw) >= 4:
            out.append(str(pw))
    return out


def scrub(text: str, extra: list[str] | None = None) -> str:
    """``text`` with every known secret (and any ``user:password@`` in a URL) masked."""
    for secret in known_secrets() + list(extra or []):
        if secret:
            text = text.replace(secret, "***")
    text = _QUERY_SECRET.sub(lambda mt: f"{mt.group(1)}=***", text)
    return _URL_PASSWORD.sub(lambda mt: f"{mt['scheme']}{mt['user']}:***@", text)
