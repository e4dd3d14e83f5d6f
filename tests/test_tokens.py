"""Token counts without litellm (aura_eval.util.tokens): the forecast table of a replay loads no
litellm. Their agreement with litellm's token_counter is checked in tests/test_forecast.py (suite)."""

import sys

from aura_eval.util import tokens


def test_a_chat_prompt_is_counted_without_importing_litellm():
    had = "litellm" in sys.modules
    one = tokens.chat_tokens([{"role": "user", "content": "hello"}])
    # 3 to prime the reply, 3 for the message, "user" and "hello" one token each
    assert one == 3 + 3 + 1 + 1
    assert tokens.chat_tokens([]) == tokens.REPLY_PRIMER
    assert tokens.text_tokens("a" * 5000) == sum(tokens.text_tokens("a" * n) for n in (1024,) * 4 + (904,))
    assert had or "litellm" not in sys.modules
