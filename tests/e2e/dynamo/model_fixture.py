#!/usr/bin/env python3
"""Writes a tiny Hugging Face-style model directory that Dynamo's mocker can serve.

Usage: python3 tests/e2e/dynamo/model_fixture.py DIR

The mocker loads only the configuration and the tokenizer (it never runs weights): `config.json`
describes a tiny `LlamaForCausalLM`, `tokenizer.json` is a byte-level BPE trained here on a few
sentences, and `tokenizer_config.json` carries a ChatML chat template and the end-of-sequence
token. The mocker answers with random token ids in [1000, 2000), so the vocabulary is padded
with added tokens ` w<i>` to 4,096 entries; with fewer, those ids decode to nothing and answers
come back with `content: null`. Takes well under a second.
"""

import json
import pathlib
import sys

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

VOCAB = 4096
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
SENTENCES = [
    "Hello there, how are you today?",
    "My program segfaults and prints a stack trace.",
    "Tell me a short story about a router and a frontend.",
    "The quick brown fox jumps over the lazy dog.",
    "Write a function that sorts a list of numbers.",
    "What is the capital of France? Paris is the capital.",
]
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(SENTENCES * 4, trainer=trainer)
    # Ordinary (non-special) added tokens decode to text, so every id the mocker picks is a word.
    padding = [f" w{i}" for i in range(VOCAB - tok.get_vocab_size())]
    tok.add_tokens(padding)
    assert tok.get_vocab_size() == VOCAB, tok.get_vocab_size()
    return tok


def main(out):
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    tok = tokenizer()
    tok.save(str(out / "tokenizer.json"))
    eos = tok.token_to_id("<|im_end|>")
    bos = tok.token_to_id("<|endoftext|>")
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "head_dim": 16,
        "vocab_size": VOCAB,
        "max_position_embeddings": 4096,
        "bos_token_id": bos,
        "eos_token_id": eos,
        "torch_dtype": "float16",
    }
    (out / "config.json").write_text(json.dumps(config, indent=2))
    tokenizer_config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "chat_template": CHAT_TEMPLATE,
        "bos_token": "<|endoftext|>",
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "model_max_length": 4096,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    main(sys.argv[1])
