"""The official openai client asks the language model for log-probabilities through `gonkad proxy`.

python logprobs.py BASE_URL MODEL  ->  prints one JSON object for tests/e2e/llm.rs to check.
"""

import json
import sys

import openai

base_url, model = sys.argv[1], sys.argv[2]
client = openai.OpenAI(base_url=base_url, api_key="unused-the-proxy-signs")
messages = [{"role": "user", "content": "What is the capital of France? Answer in one word."}]
K = 3


def tokens(logprobs):
    return [
        {
            "token": t.token,
            "logprob": t.logprob,
            "bytes": t.bytes,
            "top": [{"token": a.token, "logprob": a.logprob} for a in t.top_logprobs],
        }
        for t in logprobs
    ]


plain = client.chat.completions.create(
    model=model, messages=messages, max_tokens=16, temperature=0, logprobs=True, top_logprobs=K
)
stream = client.chat.completions.create(
    model=model,
    messages=messages,
    max_tokens=16,
    temperature=0,
    logprobs=True,
    top_logprobs=K,
    stream=True,
    stream_options={"include_usage": True},
)
streamed, streamed_logprobs, stream_usage = "", [], None
for chunk in stream:
    if chunk.choices:
        choice = chunk.choices[0]
        if choice.delta.content:
            streamed += choice.delta.content
        if choice.logprobs is not None and choice.logprobs.content:
            streamed_logprobs += tokens(choice.logprobs.content)
    if chunk.usage is not None:
        stream_usage = chunk.usage.completion_tokens

print(
    json.dumps(
        {
            "k": K,
            "plain": plain.choices[0].message.content,
            "completion_tokens": plain.usage.completion_tokens,
            "logprobs": tokens(plain.choices[0].logprobs.content),
            "streamed": streamed,
            "streamed_logprobs": streamed_logprobs,
            "stream_completion_tokens": stream_usage,
        }
    )
)
