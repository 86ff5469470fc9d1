"""The fast decoder's cache (arena/lm/decoding.py, StaticCacheDecoder): its slots are not zeroed when
made, so a prefill chunk zeroes the ones before its prompts; a decode step right after a prefill of
unsorted prompts runs the rows in the cache's (sorted) order rather than copying every cache tensor
back into the prompts' order; keep gathers rows with index_select. Each is checked against the
decoder that puts the rows back in order first (`keep(arange)`, what step did before), on one thread,
where a row's numbers do not depend on where it sits in the batch."""
import torch

from arena.lm.decoding import make_decoder
from arena.lm.model import build_model
from arena.lm.sampler import left_pad

V = 48


def _unsorted_prompts() -> list[list[int]]:
    """40 prompts of 2-30 tokens in no length order: two prefill chunks (32 + 8 rows), each cut to its
    own longest prompt, so the first chunk's rows have slots before their chunk's (start > 0)."""
    g = torch.Generator().manual_seed(11)
    lengths = [30, 2] + torch.randint(2, 20, (38,), generator=g).tolist()
    return [torch.randint(3, V, (n,), generator=g).tolist() for n in lengths]


def _decoder_pair(model, ids, mask, *, garbage: float | None = None):
    """(decoder under test, the reference that keeps every row in the prompts' order first), both
    prefilled; `garbage` fills the tested decoder's cache first, as uninitialised memory might."""
    tested, reference = (make_decoder(model, ids.shape[0], ids.shape[1] + 6) for _ in range(2))
    for cache in reference.keys + reference.values:
        cache.zero_()  # the reference reads zeros wherever nothing was written
    if garbage is not None:
        for cache in tested.keys + tested.values:
            cache.fill_(garbage)
    first_tested, first_reference = tested.prefill(ids, mask), reference.prefill(ids, mask)  # [B, V] each
    assert torch.equal(first_tested, first_reference)
    reference.keep(torch.arange(ids.shape[0]))  # the cache back in the prompts' order, copied
    return tested, reference, first_tested


def test_steps_after_an_unsorted_prefill_run_in_cache_order_and_copy_no_cache_tensor(threads):
    threads(1)
    model = build_model(V, size="tiny", seed=3)
    ids, mask = left_pad(_unsorted_prompts(), 0, "cpu")  # [40, 30] each
    with torch.inference_mode():
        tested, reference, logits = _decoder_pair(model, ids, mask)
        assert tested.pending is not None  # the prompts were not in length order
        caches = [id(c) for c in tested.keys + tested.values]
        positions = mask.sum(dim=1)  # [B]: the first generated token's position
        for _ in range(2):  # two steps in cache order: no copy of any cache tensor
            tokens = logits.argmax(dim=-1)  # [B]
            logits = tested.step(tokens, positions)  # [B, V]
            assert torch.equal(logits, reference.step(tokens, positions))
            positions = positions + 1
        assert [id(c) for c in tested.keys + tested.values] == caches
        # a keep (rows 7, 0 and 39 stay, in that order) copies the rows out of the cache's order once
        rows = torch.tensor([7, 0, 39])
        tested.keep(rows), reference.keep(rows)
        assert tested.pending is None and tested.cache_order is None
        tokens, positions = logits[rows].argmax(dim=-1), positions[rows]  # [3] each
        assert torch.equal(tested.step(tokens, positions), reference.step(tokens, positions))


def test_slots_before_a_chunk_are_zeroed_so_uninitialised_memory_never_reaches_the_logits(threads):
    # NaN in a slot before a chunk's prompts would survive the -inf bias: q k = NaN, and 0 * NaN = NaN
    # in softmax(.) v; zeroed, those slots give weight exp(-inf) = 0 times v = 0 exactly
    threads(1)
    model = build_model(V, size="tiny", seed=3)
    ids, mask = left_pad(_unsorted_prompts(), 0, "cpu")  # [40, 30] each
    with torch.inference_mode():
        tested, reference, logits = _decoder_pair(model, ids, mask, garbage=float("nan"))
        tokens, positions = logits.argmax(dim=-1), mask.sum(dim=1)  # [B] each
        stepped, expected = tested.step(tokens, positions), reference.step(tokens, positions)  # [B, V] each
    assert torch.isfinite(stepped).all()
    assert torch.equal(stepped, expected)
