"""A tokenizer shaped like a real HF checkpoint's: byte-level BPE built locally with the
`tokenizers` library (no hub), saved in the HF layout and loaded back with `AutoTokenizer`.
Unlike arena's own tokenizers, `<action>`/`</action>` are NOT added tokens: the corpus never
contains them, so BPE spells `</action>` with several tokens, as Qwen3's tokenizer does."""
from __future__ import annotations

from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

STOP = "</action>"
# English-like text plus Sokoban boards; no tags, so no merge ever forms "</action>".
CORPUS = [
    "the player pushes the box to the left and then up to the target",
    "#####\n#_OX#\n#_P_#\n#####",
    "think about the action: move up, down, left or right",
    "the action is left. the action is right. then the box is on the target",
] * 50


def build_real_tokenizer(path: Path, vocab_size: int = 300) -> PreTrainedTokenizerFast:
    """Train, save to `path` (tokenizer.json + tokenizer_config.json + special_tokens_map.json)
    and return `AutoTokenizer.from_pretrained(path)`."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer=trainer)
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                                      clean_up_tokenization_spaces=False)
    wrapped.save_pretrained(str(path))
    return AutoTokenizer.from_pretrained(str(path))
