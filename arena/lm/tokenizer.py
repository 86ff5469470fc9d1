"""A tiny tokenizer trained locally on the environments' text.

Three kinds; `word` and `bpe` are byte-level BPE (so every string encodes, nothing maps to
`<unk>`, and `decode(encode(x)) == x` exactly). A run's default is `wordlevel` (the schema's
`model.tokenizer`); `build_tokenizer` called on its own defaults to `word`.

- `word`: the text is first split into words (with their leading space, as in
  " push"), and every other character stands alone — grid rows such as "#_OXP#" become one
  token per cell, digits one token each. BPE merges only inside words, so with a few hundred
  merges each frequent word is a single token and rare words fall back to pieces.
- `bpe`: the standard GPT-2 byte-level pre-tokenizer; BPE may also merge runs of grid cells.
- `wordlevel`: the same word/character pieces as `word`, but the vocabulary is exactly the
  pieces seen in the corpus (most frequent first, up to `vocab_size`), with no byte alphabet.
  For the embedded testbeds this gives a vocabulary of tens of tokens instead of ~400, so a
  freshly initialised model spreads its probability over the tokens that matter (the RL
  sanity check learns from a random init). A piece never seen maps to `<unk>`, so decoding is
  exact only on text made of known pieces (all of an environment's own text).

Measured on 300 synthetic Sokoban prompts (random 6x6 grids, ~150 characters) with
vocab_size=512: `word` 75.6 tokens per prompt, and its vocabulary stops at 373 entries (no pair
left to merge); `bpe` 60.2 tokens with all 512 entries, because it merges random runs of grid
cells into opaque tokens. `word` beats `bpe`: a few more tokens, but one token per cell, which
keeps the board's layout readable for a small model; `wordlevel` keeps those pieces with a
vocabulary of tens of tokens.

`<think>`, `</think>`, `<action>`, `</action>` are single tokens that `decode` keeps
(added tokens, not "special"), while `<pad>`, `<eos>`, `<unk>` are special tokens that
`decode(..., skip_special_tokens=True)` drops. The result is a `PreTrainedTokenizerFast`;
`save_pretrained(path)` writes the standard HF layout that `AutoTokenizer.from_pretrained`
loads.
"""
from __future__ import annotations

from typing import Iterable

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

TAG_TOKENS = ("<think>", "</think>", "<action>", "</action>")
PAD, EOS, UNK = "<pad>", "<eos>", "<unk>"
SPECIAL_TOKENS = (PAD, EOS, UNK)
KINDS = ("word", "bpe", "wordlevel")

# One piece per word (letters, optional capital first, optional leading space), per
# whitespace run, or per other character. Grid rows like "#_OXP" contain no lowercase word, so
# each cell is its own piece. `\s+(?!\S)` keeps the last space of a run for the next word.
WORD_PATTERN = r" ?[A-Za-z]?[a-z]+| ?[^\sa-z]|\s+(?!\S)|\s+"


def _pre_tokenizer(kind: str) -> pre_tokenizers.PreTokenizer:
    if kind == "word":
        words = pre_tokenizers.Split(Regex(WORD_PATTERN), behavior="isolated")
        return pre_tokenizers.Sequence([words, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    return pre_tokenizers.ByteLevel(add_prefix_space=False)


def build_tokenizer(corpus: Iterable[str], *, vocab_size: int = 1024, kind: str = "word") -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer on `corpus` (any iterable of strings).

    `vocab_size` counts everything: the 256 byte symbols, the 7 special/tag tokens and the
    merges. It must leave room for the byte alphabet."""
    if kind not in KINDS:
        raise ValueError(f"unknown tokenizer kind {kind!r}; valid kinds: {', '.join(KINDS)}")
    if kind == "wordlevel":
        return _wrap(_build_wordlevel(corpus, vocab_size))
    n_fixed = 256 + len(SPECIAL_TOKENS) + len(TAG_TOKENS)
    if vocab_size < n_fixed:
        raise ValueError(f"vocab_size={vocab_size} is too small: need at least {n_fixed} (256 bytes + tokens)")
    tok = Tokenizer(models.BPE(unk_token=UNK))
    tok.pre_tokenizer = _pre_tokenizer(kind)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(TAG_TOKENS),  # the tags are appended after training
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    # The tags are cut out before pre-tokenisation, so they never take part in merges.
    tok.train_from_iterator(_without_tags(corpus), trainer=trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAG_TOKENS])
    return _wrap(tok)


def _build_wordlevel(corpus: Iterable[str], vocab_size: int) -> Tokenizer:
    """vocab = specials + the most frequent pieces of `corpus` (tags cut out first) + tags."""
    from collections import Counter

    split = pre_tokenizers.Split(Regex(WORD_PATTERN), behavior="isolated")
    counts: Counter = Counter()
    for text in _without_tags(corpus):
        counts.update(piece for piece, _ in split.pre_tokenize_str(text))
    room = vocab_size - len(SPECIAL_TOKENS) - len(TAG_TOKENS)
    if room < 1:
        raise ValueError(f"vocab_size={vocab_size} is too small for wordlevel: need more than {len(SPECIAL_TOKENS) + len(TAG_TOKENS)}")
    pieces = [p for p, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:room]]
    vocab = {t: i for i, t in enumerate([*SPECIAL_TOKENS, *pieces])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=UNK))
    tok.pre_tokenizer = split
    tok.decoder = decoders.Fuse()
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TAG_TOKENS])
    return tok


def _wrap(tok: Tokenizer) -> PreTrainedTokenizerFast:
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token=PAD,
        eos_token=EOS,
        unk_token=UNK,
        clean_up_tokenization_spaces=False,
        padding_side="left",
    )


def _without_tags(corpus: Iterable[str]) -> Iterable[str]:
    for text in corpus:
        for tag in TAG_TOKENS:
            text = text.replace(tag, "\n")
        yield text


def tag_id(tokenizer, tag: str) -> int:
    """The id of one of the four tag tokens (e.g. the sampler's stop token `</action>`)."""
    if tag not in TAG_TOKENS:
        raise ValueError(f"unknown tag {tag!r}; valid tags: {', '.join(TAG_TOKENS)}")
    ids = tokenizer.encode(tag, add_special_tokens=False)
    if len(ids) != 1:
        raise ValueError(f"tokenizer splits {tag!r} into {len(ids)} tokens; it must be a single token")
    return ids[0]


def encode_texts(tokenizer, texts) -> list[list[int]]:
    """tokenizer(texts, add_special_tokens=False)["input_ids"]: the same ids, through the fast
    backend's `encode_batch_fast` (which skips the offsets nobody reads here) when the tokenizer has
    one. transformers' own call wraps the same backend call in Python that cost ~3/4 of its time: 17.8
    against 4.3 ms for 243 Sokoban prompts (1 torch thread; benchmarks/bench_eval.py's eval calls it
    once per turn)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)  # a PreTrainedTokenizerFast's tokenizers.Tokenizer
    if backend is None or not hasattr(backend, "encode_batch_fast"):
        return tokenizer(list(texts), add_special_tokens=False)["input_ids"]
    return [encoding.ids for encoding in backend.encode_batch_fast(list(texts), add_special_tokens=False)]


def chat_ids(tokenizer, messages) -> list[int]:
    """Chat messages -> prompt ids in the tokenizer's chat template, ready for the reply."""
    ids = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)  # transformers 5 returns a BatchEncoding


def encode_prompts(tokenizer, prompts) -> list[list[int]]:
    """Each turn's prompt ids, as every backend, BC and `arena eval` encode them: one user message in
    the tokenizer's chat template when it has one (a pretrained LLM's, as the authors' setup uses
    it), else the raw text (encode_texts: arena's own tokenizers have no template)."""
    if getattr(tokenizer, "chat_template", None):
        return [chat_ids(tokenizer, [{"role": "user", "content": p}]) for p in prompts]
    return encode_texts(tokenizer, prompts)


def decode_rows(tokenizer, rows, *, skip_special_tokens: bool = True) -> list[str]:
    """tokenizer.batch_decode(rows, skip_special_tokens=...) for rows of token ids (lists of ints): the
    same texts, through the fast backend's `decode_batch` when the tokenizer has one and cleans up no
    spaces (transformers' call converts every id through its generic `to_py_obj` first: ~70 ms of a
    1.6 s Sokoban eval, profiled)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or getattr(tokenizer, "clean_up_tokenization_spaces", True):
        return tokenizer.batch_decode(rows, skip_special_tokens=skip_special_tokens)
    return backend.decode_batch([list(row) for row in rows], skip_special_tokens=skip_special_tokens)
