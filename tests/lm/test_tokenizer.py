"""The embedded backend's tokenizer: tags as single tokens, exact round trips, HF layout."""
import pytest
from transformers import AutoTokenizer

from arena.lm.tokenizer import KINDS, TAG_TOKENS, build_tokenizer, tag_id

GRID = "#####\n#_OX#\n#__P#\n#####"
CORPUS = [
    f"You are playing Sokoban. Push every box onto a target.\nTurn {i}:\n{GRID}\n"
    f"<think>push the box {d}</think><action>{d}</action>"
    for i, d in enumerate(["up", "down", "left", "right"] * 10)
]
RESPONSES = [
    "<think>push box left</think><action>left</action>",
    "<think>the box is above me, so I go up</think><action>up</action>",
    "<think></think><action>go to drawer 1</action>",
]


BYTE_LEVEL_KINDS = [k for k in KINDS if k != "wordlevel"]


@pytest.fixture(scope="module", params=BYTE_LEVEL_KINDS)
def tok(request):
    return build_tokenizer(CORPUS, vocab_size=300, kind=request.param)


def test_tags_are_single_tokens_and_responses_round_trip(tok):
    for tag in TAG_TOKENS:
        assert len(tok.encode(tag, add_special_tokens=False)) == 1
        assert tok.convert_ids_to_tokens([tag_id(tok, tag)]) == [tag]
    for text in RESPONSES:
        ids = tok.encode(text, add_special_tokens=False)
        # the four tags appear as their own ids, in order
        assert [i for i in ids if i in {tag_id(tok, t) for t in TAG_TOKENS}] == [tag_id(tok, t) for t in TAG_TOKENS]
        assert tok.decode(ids, skip_special_tokens=True) == text


def test_any_text_round_trips_byte_level(tok):
    # Unseen words, unicode grid glyphs, tabs and runs of spaces: byte-level BPE never needs <unk>.
    for text in CORPUS[:3] + ["zebra   quartz\t√ S\n\n  end", "Ünïcödé → 42"]:
        ids = tok.encode(text, add_special_tokens=False)
        assert tok.unk_token_id not in ids
        assert tok.decode(ids) == text


def test_special_tokens_and_vocab_size(tok):
    assert (tok.pad_token, tok.eos_token, tok.unk_token) == ("<pad>", "<eos>", "<unk>")
    assert len({tok.pad_token_id, tok.eos_token_id, tok.unk_token_id}) == 3
    assert len(tok) <= 300
    ids = tok.encode(RESPONSES[0], add_special_tokens=False)
    # pad/eos are dropped by skip_special_tokens, the tags are kept
    assert tok.decode(ids + [tok.eos_token_id, tok.pad_token_id], skip_special_tokens=True) == RESPONSES[0]
    assert tok.padding_side == "left"


def test_word_kind_gives_one_token_per_grid_cell_and_per_frequent_word():
    tok = build_tokenizer(CORPUS, vocab_size=300, kind="word")
    # "#_OX#" has no lowercase word, so each of its 5 cells is one token
    assert tok.convert_ids_to_tokens(tok.encode("#_OX#", add_special_tokens=False)) == ["#", "_", "O", "X", "#"]
    # frequent corpus words are single tokens, with their leading space (Ġ in byte-level form)
    assert tok.convert_ids_to_tokens(tok.encode("push the box", add_special_tokens=False)) == ["push", "Ġthe", "Ġbox"]
    # whole training prompt: "You are playing Sokoban." = 5 tokens, "Turn 0:" = Turn, Ġ, 0, : ...
    n_tokens = len(tok.encode(CORPUS[0], add_special_tokens=False))
    assert n_tokens < len(CORPUS[0]) / 2


def test_save_pretrained_loads_with_auto_tokenizer(tok, tmp_path):
    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    for text in CORPUS[:2] + RESPONSES:
        assert again.encode(text, add_special_tokens=False) == tok.encode(text, add_special_tokens=False)
        assert again.decode(tok.encode(text, add_special_tokens=False), skip_special_tokens=True) == text
    assert (again.pad_token_id, again.eos_token_id) == (tok.pad_token_id, tok.eos_token_id)


def test_wordlevel_vocabulary_is_exactly_the_corpus_pieces(tmp_path):
    # CORPUS pieces: words with their leading space, single non-letter characters, the tags.
    tok = build_tokenizer(CORPUS, vocab_size=300, kind="wordlevel")
    vocab = tok.get_vocab()
    assert len(tok) < 60  # tens of pieces, no 256-byte alphabet
    assert {"#", "_", "O", "X", "P", "\n", " box", "up", "<action>", "</action>"} <= set(vocab)
    for text in CORPUS[:3] + [RESPONSES[0]]:  # text made of known pieces round-trips exactly
        ids = tok.encode(text, add_special_tokens=False)
        assert tok.unk_token_id not in ids and tok.decode(ids) == text
    assert tok.unk_token_id in tok.encode("zebra", add_special_tokens=False)  # unseen -> <unk>
    tok.save_pretrained(tmp_path)
    again = AutoTokenizer.from_pretrained(tmp_path, local_files_only=True)
    assert again.encode(CORPUS[0], add_special_tokens=False) == tok.encode(CORPUS[0], add_special_tokens=False)
    # a tiny vocab_size keeps the most frequent pieces only
    assert len(build_tokenizer(CORPUS, vocab_size=20, kind="wordlevel")) == 20


def test_bad_arguments_list_the_choices():
    with pytest.raises(ValueError, match="word, bpe"):
        build_tokenizer(CORPUS, kind="sentencepiece")
    with pytest.raises(ValueError, match="at least 263"):
        build_tokenizer(CORPUS, vocab_size=100)
    tok = build_tokenizer(CORPUS, vocab_size=300)
    with pytest.raises(ValueError, match="</action>"):
        tag_id(tok, "<answer>")
