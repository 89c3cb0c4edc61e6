"""The official openai client, unchanged and without any gonka key, through `gonkad proxy`.

python chat.py BASE_URL MODEL  ->  prints one JSON object for tests/e2e/proxy.rs to check.
"""

import json
import sys

import openai

base_url, model = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base_url, api_key="unused-the-proxy-signs")
messages = [{"role": "user", "content": "Hello, gonka"}]

models = [m.id for m in client.models.list()]
plain = client.chat.completions.create(model=model, messages=messages, max_tokens=16)
stream = client.chat.completions.create(
    model=model,
    messages=messages,
    max_tokens=16,
    stream=True,
    stream_options={"include_usage": True},
)
streamed, stream_usage = "", None
for chunk in stream:
    if chunk.choices and chunk.choices[0].delta.content:
        streamed += chunk.choices[0].delta.content
    if chunk.usage is not None:
        stream_usage = chunk.usage.completion_tokens
try:
    client.chat.completions.create(model="no/such-model", messages=messages, max_tokens=4)
    refused = None
except openai.APIStatusError as error:
    refused = error.status_code

print(
    json.dumps(
        {
            "models": models,
            "plain": plain.choices[0].message.content,
            "id": plain.id,
            "completion_tokens": plain.usage.completion_tokens,
            "finish_reason": plain.choices[0].finish_reason,
            "streamed": streamed,
            "stream_completion_tokens": stream_usage,
            "refused": refused,
        }
    )
)
