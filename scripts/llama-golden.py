#!/usr/bin/env python3
"""Writes llm/tests/fixtures/llama_cpp_tokens.json: token ids llama.cpp's tokenizer gives for
golden strings on the model gonka-llm runs, which gonka-llm's tokenizer must reproduce.

Run once with the llama-cpp-python venv (tests/llama/requirements.txt):
    tests/llama/.venv/bin/python scripts/llama-golden.py [MODEL.gguf]
The model defaults to ${GONKA_LLM_MODEL} or ${GONKA_HOME:-~/.gonka}/models/SmolLM2-135M-Instruct.Q4_1.gguf.
"""
import json
import os
import sys

from llama_cpp import Llama

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "llm", "tests", "fixtures", "llama_cpp_tokens.json")


def default_model():
    if os.environ.get("GONKA_LLM_MODEL"):
        return os.environ["GONKA_LLM_MODEL"]
    home = os.environ.get("GONKA_HOME") or os.path.join(os.path.expanduser("~"), ".gonka")
    return os.path.join(home, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")


PLAIN = [
    "Hello", "Hello, world!", "hello world", " Hello", "  Hello", "Hello ", "Hello  ",
    "The quick brown fox jumps over the lazy dog.",
    "What is the capital of France? Answer in one word.",
    "Paris", " Paris", "PARIS", "paris.",
    "I'm", "I'M", "don't", "DON'T", "we've", "they'll", "she'd", "it's", "you're",
    "'s", "'t", "''", "'quoted'", "\"double quoted\"",
    "0", "1", "12", "123", "1234", "12345678901234567890", " 42", "3.14159", "-17", "+5",
    "1,000,000", "1e-10", "0x1F", "2024-06-01", "10:45:30", "$99.99", "50%", "#1", "v1.2.3",
    "a1b2c3", "abc123def", "7th 21st 3rd",
    " ", "  ", "   ", "    ", "\t", "\n", "\n\n", "\r\n", " \n", "\n ", "a  b", "a   b",
    "a\tb", "a \tb", "a\t b", "a\n\nb", "  leading", "trailing  ", "x    y     z",
    "line one\nline two\n\nline four", "\t\tindented\n\t\t\tmore",
    "café", "naïve", "Zürich", "São Paulo", "Ελληνικά", "русский язык", "日本語のテキスト",
    "中文文本", "한국어", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก",
    "Tiếng Việt", "Ünïcödé", "ß ẞ", "ﬁ ﬂ", "ｆｕｌｌｗｉｄｔｈ", "½ ¾ ² ³ Ⅻ ①",
    "😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "❤️", "I love 🍕 and 🍣!", "🙂🙃😉",
    "∑ ∫ √ π ≈ ≠ ≤ ≥ ∞", "→ ← ⇒ ⇔", "© ® ™ € £ ¥", "«guillemets» „quotes“",
    "fn main() { println!(\"{}\", x + 1); }",
    "def f(x):\n    return [i**2 for i in range(x) if i % 2 == 0]\n",
    "for (int i = 0; i < n; ++i) { a[i] = b[i] * 2; }",
    "SELECT * FROM users WHERE id = 42;",
    "<html><body class=\"a\">&amp; &lt;tag&gt;</body></html>",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
    "https://example.com/path?q=1&r=two#frag",
    "user@example.com", "C:\\Windows\\System32", "~/src/*.rs", "$HOME/.gonka",
    "a.b.c", "...", "!!!", "???", "?!", "---", "===", "***", "___", "()", "[]{}<>",
    "@#$%^&*", "a-b_c", "snake_case_name", "camelCaseName", "PascalCaseName",
    "kebab-case-name", "ALLCAPS", "MiXeD cAsE",
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start|>user\nhi<|im_end|>",
    "<repo_name>x", "<|not_a_token|>", "<s></s>",
    "\u0000", "\u0001\u0002", "\u007f", "\ufeff", "a\u0300", "e\u0301\u0302",
    "The year 1999 and 2000.", "Call 555-1234 now!", "pi is about 3.14",
    "Mr. Smith's dog's bone", "rock'n'roll", "O'Reilly", "l'homme",
    "A sentence.  Two spaces after.", "Tabs\tin\tthe\tmiddle", "Ending with newline\n",
]

SPECIAL = [
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is the capital of France? Answer in one word.<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>user\nhi<|im_end|>",
    "<|im_start|><|im_end|><|endoftext|>",
    "text<|im_end|>more text",
    "<|im_start|>assistant\n2 + 2 = 4.<|im_end|>\n",
    "<repo_name>gonka<file_sep>main.rs",
    "no special tokens here",
    "<|im_start |> almost special",
]


def main():
    model = sys.argv[1] if len(sys.argv) > 1 else default_model()
    llm = Llama(model_path=model, vocab_only=True, verbose=False)
    out = []
    for special, strings in ((False, PLAIN), (True, SPECIAL)):
        for s in strings:
            ids = llm.tokenize(s.encode("utf-8"), add_bos=False, special=special)
            out.append({"text": s, "special": special, "ids": ids})
    with open(OUT, "w") as f:
        f.write("[\n" + ",\n".join(json.dumps(e, ensure_ascii=True) for e in out) + "\n]\n")
    print(f"{len(out)} strings -> {OUT}")


if __name__ == "__main__":
    main()
