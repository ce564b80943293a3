"""Byte-level BPE tokenizer in the Qwen3.5 form (qwen35.md 6.1), trained with `tokenizers`.

* NFC normaliser, Split(Qwen3.5 regex, isolated) + ByteLevel(use_regex=False) pre-tokenizer,
  ByteLevel post-processor/decoder, BPE without byte fallback / unk, no BOS.
* Regular tokens first (ids 0 .. V-1-len(SPECIALS)), then the special tokens at the end,
  like the real Qwen vocabularies.
* Deterministic: same text sample -> byte-identical tokenizer.json.
"""
from __future__ import annotations

import json
import os

from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import BPE
from tokenizers.trainers import BpeTrainer

QWEN35_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
                r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
            "<tool_response>", "</tool_response>", "<think>", "</think>",
            "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>"]

HERE = os.path.dirname(os.path.abspath(__file__))


def new_tokenizer() -> Tokenizer:
    tok = Tokenizer(BPE(unk_token=None, continuing_subword_prefix="", end_of_word_suffix="",
                        fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN35_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    try:
        tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    except TypeError:
        tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False)
    try:
        tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    except TypeError:
        tok.decoder = decoders.ByteLevel()
    return tok


def train_tokenizer(texts, vocab_size: int = 8192) -> Tokenizer:
    tok = new_tokenizer()
    trainer = BpeTrainer(vocab_size=vocab_size - len(SPECIALS), min_frequency=2, show_progress=False,
                         special_tokens=[], initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    tok.add_special_tokens([AddedToken(s, single_word=False, lstrip=False, rstrip=False, normalized=False,
                                       special=True) for s in SPECIALS])
    assert tok.get_vocab_size() == vocab_size, tok.get_vocab_size()
    return tok


def chat_template() -> str:
    with open(os.path.join(HERE, "chat_template.jinja")) as f:
        return f.read().rstrip("\n")


def tokenizer_config(tok: Tokenizer, tokenizer_class: str = "Qwen2Tokenizer") -> dict:
    added = {}
    for s in SPECIALS:
        i = tok.token_to_id(s)
        added[str(i)] = {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                         "single_word": False, "special": True}
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": added,
        "additional_special_tokens": [s for s in SPECIALS if s not in ("<|endoftext|>",)],
        "bos_token": None,
        "chat_template": chat_template(),
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 32768,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": tokenizer_class,
        "unk_token": None,
    }


def save(tok: Tokenizer, outdir: str, tokenizer_class: str = "Qwen2Tokenizer"):
    os.makedirs(outdir, exist_ok=True)
    tok.save(os.path.join(outdir, "tokenizer.json"), pretty=True)
    save_config(tok, outdir, tokenizer_class)


def save_config(tok: Tokenizer, outdir: str, tokenizer_class: str = "Qwen2Tokenizer"):
    with open(os.path.join(outdir, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config(tok, tokenizer_class), f, indent=2, ensure_ascii=False)
        f.write("\n")


def special_ids(tok: Tokenizer) -> dict:
    return {s: tok.token_to_id(s) for s in SPECIALS}
