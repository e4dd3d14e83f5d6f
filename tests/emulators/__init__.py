"""Local emulators of the providers config/paper.yaml uses, each speaking its provider's own wire
format and sending its own errors (tests/emulators/base.py says how they are scripted and counted).

`EMULATORS` maps each dialect to its emulator class; `PROVIDER_DIALECT` maps a litellm model
string's provider to the dialect that answers it.
"""

from tests.emulators.anthropic_messages import AnthropicEmulator
from tests.emulators.deepseek import DeepSeekEmulator
from tests.emulators.gemini import GeminiEmulator
from tests.emulators.openai_chat import OpenAIEmulator
from tests.emulators.openrouter import OpenRouterEmulator
from tests.emulators.vllm import VLLMEmulator

EMULATORS = {"openai": OpenAIEmulator, "anthropic": AnthropicEmulator, "gemini": GeminiEmulator,
             "deepseek": DeepSeekEmulator, "openrouter": OpenRouterEmulator, "vllm": VLLMEmulator}
PROVIDER_DIALECT = {"openai": "openai", "anthropic": "anthropic", "gemini": "gemini", "deepseek": "deepseek",
                    "openrouter": "openrouter", "hosted_vllm": "vllm"}
