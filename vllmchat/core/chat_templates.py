"""Built-in chat templates, chosen by architecture when a GGUF carries none."""

from __future__ import annotations

from collections.abc import Callable

GEMMA = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}"
    "{%- set first_user_prefix = '' -%}"
    "{%- set loop_messages = messages -%}"
    "{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else 'user' -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '')"
    " + message['content'] + '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)

LLAMA3 = (
    "{{ bos_token }}"
    "{%- for message in messages -%}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    " + message['content'] + '<|eot_id|>' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{%- endif -%}"
)

LLAMA2 = (
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- set system = '<<SYS>>\n' + messages[0]['content'] + '\n<</SYS>>\n\n' -%}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}"
    "{%- set system = '' -%}"
    "{%- set loop_messages = messages -%}"
    "{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if message['role'] == 'user' -%}"
    "{{ bos_token + '[INST] ' + (system if loop.first else '') + message['content'] + ' [/INST]' }}"
    "{%- else -%}"
    "{{ ' ' + message['content'] + ' ' + eos_token }}"
    "{%- endif -%}"
    "{%- endfor -%}"
)

MISTRAL = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}"
    "{%- set first_user_prefix = '' -%}"
    "{%- set loop_messages = messages -%}"
    "{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if message['role'] == 'user' -%}"
    "{{ '[INST] ' + (first_user_prefix if loop.first else '') + message['content'] + '[/INST]' }}"
    "{%- else -%}"
    "{{ message['content'] + eos_token }}"
    "{%- endif -%}"
    "{%- endfor -%}"
)

CHATML = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\n' }}{%- endif -%}"
)

PHI3 = (
    "{%- for message in messages -%}"
    "{{ '<|' + message['role'] + '|>\n' + message['content'] + '<|end|>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|assistant|>\n' }}{%- endif -%}"
)

BUILTIN_TEMPLATES: dict[str, str] = {
    "gemma": GEMMA,
    "llama3": LLAMA3,
    "llama2": LLAMA2,
    "mistral": MISTRAL,
    "chatml": CHATML,
    "phi3": PHI3,
}

_ARCH_FAMILIES: dict[str, str] = {
    "gemma": "gemma",
    "gemma2": "gemma",
    "gemma3": "gemma",
    "gemma3n": "gemma",
    "qwen": "chatml",
    "qwen2": "chatml",
    "qwen2moe": "chatml",
    "qwen3": "chatml",
    "qwen3moe": "chatml",
    "phi3": "phi3",
    "phi2": "chatml",
    "phimoe": "phi3",
    "mistral": "mistral",
    "mistral3": "mistral",
    "internlm2": "chatml",
    "olmo2": "chatml",
    "smollm3": "chatml",
}


def builtin_template_for(architecture: str, has_token: Callable[[str], bool]) -> str:
    """Name of the built-in template for a model without its own.

    ``has_token`` says whether the vocabulary has a token with this exact text;
    the ``llama`` architecture covers Llama 2, Llama 3 and Mistral, told apart
    by their control tokens.
    """
    arch = architecture.lower()
    if arch in _ARCH_FAMILIES:
        return _ARCH_FAMILIES[arch]
    if arch.startswith("gemma"):
        return "gemma"
    if arch.startswith("qwen"):
        return "chatml"
    if arch.startswith("phi"):
        return "phi3"
    if has_token("<|start_header_id|>") and has_token("<|eot_id|>"):
        return "llama3"
    if has_token("<|im_start|>"):
        return "chatml"
    if has_token("[INST]"):
        return "mistral"
    if has_token("<start_of_turn>"):
        return "gemma"
    return "llama2"
