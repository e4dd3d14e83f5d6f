"""Is an error a missing or refused key? The one place the rules live: a retry never mends one, the
stage fails the job on it and the preflight names its fix. Each rule is named for what it reads;
nothing here imports litellm (the caller hands over its module) and only the preflight's rule
imports openai's exception classes (litellm's subclass them), when it is asked."""

from __future__ import annotations

import re

# litellm classes "Missing credentials" as a server error, so the text decides too.
_LITELLM_AUTH_TEXT = re.compile(r"missing credentials|api[_ ]key.*(not set|missing|invalid)|incorrect api key|"
                                r"unauthori[sz]ed", re.I)


def status_code_of(err: Exception) -> int | None:
    """The HTTP status of an SDK error (openai and anthropic: `status_code`; google-genai: `code`)."""
    code = getattr(err, "status_code", None) or getattr(err, "code", None)
    return code if isinstance(code, int) else None


def by_litellm_class_or_text(err: Exception, litellm) -> bool:
    """A live call's error (litellm's): its exception class (`AuthenticationError`,
    `PermissionDeniedError`) or its text (missing credentials, a missing, invalid or incorrect key,
    unauthorized)."""
    return (isinstance(err, (litellm.AuthenticationError, litellm.PermissionDeniedError))
            or bool(_LITELLM_AUTH_TEXT.search(str(err))))


def by_status_or_credential_words(err: Exception) -> bool:
    """A batch SDK's error (openai, anthropic, google-genai): HTTP 401 or 403, or credential words in
    its text (Google answers a bad key with 400 API_KEY_INVALID)."""
    text = str(err).lower()
    return (status_code_of(err) in (401, 403) or "credentials" in text or "api_key" in text
            or "api key not valid" in text)


def by_openai_class_or_invalid_key_text(err: Exception, text: str) -> bool:
    """A preflight probe's error (litellm's exceptions subclass openai's): openai's
    `AuthenticationError` or `PermissionDeniedError`, or Google's "API key not valid" in `text` (the
    error's line as the preflight shows it)."""
    import openai

    return (isinstance(err, (openai.AuthenticationError, openai.PermissionDeniedError))
            or "api key not valid" in text.lower())
