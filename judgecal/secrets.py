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


def endpoint_without_secrets(url: str) -> str:
    """``url`` as it may be stored: the one function every path that stores an endpoint calls
    (``judgecal rate``, every importer that reads ``judge_endpoint``, the judge row itself in
    :func:`judgecal.db.queries.get_or_create_judge`, ``mc --base-url``).

    An URL (``scheme://...``): ``user:password@`` removed, query string and fragment dropped
    (Azure-style ``?api-key=``), trailing slash of the path removed, host lower-cased, an IPv6
    host kept in brackets (``http://[::1]:19101/v1``), the port kept. Text without ``://`` (an
    imported judge's label such as ``import``): anything from ``?`` or ``#`` on dropped and a
    ``user:password@`` before the first ``/`` removed. Either way every known secret
    (:func:`known_secrets`) and ``password=``/``api_key=``/``token=``... value left in the
    path is masked ``***`` (:func:`scrub`). Idempotent: a stored value comes back unchanged.

    >>> endpoint_without_secrets("http://user:S3cret@[::1]:19101/v1/?api_key=K#f")
    'http://[::1]:19101/v1'
    """
    from urllib.parse import urlsplit, urlunsplit

    text = str(url)
    if "://" not in text:
        text = re.split(r"[?#]", text, maxsplit=1)[0]
        head, sep, tail = text.partition("/")
        if "@" in head:
            head = head.rsplit("@", 1)[1]
        return scrub(head + sep + tail)
    try:
        parts = urlsplit(text)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:  # an unreadable port or bracket: keep what surely holds no credentials
        scheme, _, rest = text.partition("://")
        rest = re.split(r"[?#]", rest, maxsplit=1)[0]
        head, sep, tail = rest.partition("/")
        return scrub(f"{scheme}://{head.rsplit('@', 1)[-1]}{sep}{tail}".rstrip("/"))
    if ":" in host:  # an IPv6 address: urlsplit took its brackets off
        host = f"[{host}]"
    if port is not None:
        host = f"{host}:{port}"
    return scrub(urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", "")))
