"""The BC checkpoint cache (docs/design.md, BC checkpoints): the model folder is on disk
(fsynced) before bc.json says it is complete, and a truncated or corrupted cached model is
set aside and trained again, never loaded."""
import json
import os

import pytest

from arena.bc import train as bc_module
from arena.config import load_config


@pytest.fixture
def fake_bc(tmp_path, monkeypatch, one_thread):
    """ensure_bc_checkpoint with train_bc replaced by: save a tiny model and tokenizer (the real
    save_checkpoint) and count the calls."""
    from arena.lm.model import build_model, save_checkpoint
    from arena.lm.tokenizer import build_tokenizer

    calls = []

    def train_bc(cfg, model_dir, log=print):
        tok = build_tokenizer(["go left go right"], kind="wordlevel", vocab_size=32)
        save_checkpoint(build_model(len(tok), size="tiny", seed=len(calls)), tok, model_dir)
        calls.append(str(model_dir))
        return {"demos": 1, "eval_success": 0.5}

    monkeypatch.setattr(bc_module, "train_bc", train_bc)
    cfg = load_config(["env=sanity", f"results_dir={tmp_path}"])
    return cfg, calls


def _weights(cfg):
    return bc_module.bc_dir(cfg) / "model" / "model.safetensors"


def test_model_files_are_fsynced_before_bc_json_is_written(fake_bc, monkeypatch):
    cfg, _ = fake_bc
    synced = []
    real_fsync = os.fsync

    def recording_fsync(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    model_dir = bc_module.ensure_bc_checkpoint(cfg, log=lambda *_: None)
    files = sorted(str(p) for p in model_dir.iterdir())
    bc_json_write = next(i for i, p in enumerate(synced) if os.path.basename(p).startswith(".bc.json."))
    for name in files:  # every model file was fsynced, and before bc.json's temp file
        assert name in synced[:bc_json_write], name
    assert str(model_dir) in synced[:bc_json_write]  # and the folder (its entries)
    report = json.loads((model_dir.parent / "bc.json").read_text())
    assert set(report["model_files"]) == {os.path.basename(f) for f in files}


@pytest.mark.parametrize("damage", ["truncate", "flip_byte", "delete"])
def test_a_damaged_cached_model_is_retrained_not_loaded(fake_bc, damage):
    from arena.lm.model import load_model

    cfg, calls = fake_bc
    log = []
    model_dir = bc_module.ensure_bc_checkpoint(cfg, log=log.append)
    assert bc_module.ensure_bc_checkpoint(cfg, log=log.append) == model_dir and len(calls) == 1  # cached
    weights = _weights(cfg)
    data = weights.read_bytes()
    if damage == "truncate":  # a kill mid-write without fsync: the file is cut short
        weights.write_bytes(data[: len(data) // 2])
    elif damage == "flip_byte":  # same size, one byte changed: only the sha256 sees it
        weights.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))
    else:
        weights.unlink()
    assert bc_module.cache_problem(model_dir.parent) is not None
    assert bc_module.ensure_bc_checkpoint(cfg, log=log.append) == model_dir
    assert len(calls) == 2  # trained again
    assert bc_module.cache_problem(model_dir.parent) is None
    assert [p.name for p in model_dir.parent.glob("bc.json.corrupt-*")]  # the old record kept aside
    assert any("not usable" in line for line in log)
    load_model(model_dir)  # the new checkpoint loads


@pytest.mark.parametrize("old_field", ["model_files", "bc_hash"])
def test_an_old_format_bc_json_is_retrained_not_trusted(fake_bc, old_field):
    # a bc.json without file digests, or without the key it was written for (an older arena's):
    # no proof the model is intact or is this config's, so BC runs again
    cfg, calls = fake_bc
    model_dir = bc_module.ensure_bc_checkpoint(cfg, log=lambda *_: None)
    bc_json = model_dir.parent / "bc.json"
    report = json.loads(bc_json.read_text())
    del report[old_field]
    bc_json.write_text(json.dumps(report))
    assert bc_module.cache_problem(model_dir.parent) is not None
    bc_module.ensure_bc_checkpoint(cfg, log=lambda *_: None)
    assert len(calls) == 2 and bc_module.cache_problem(model_dir.parent) is None


def test_two_seeds_swapped_cache_folders_are_retrained_not_used(fake_bc):
    from arena.bc.key import bc_hash

    cfg0, calls = fake_bc
    cfg1 = load_config(["env=sanity", f"results_dir={cfg0.results_dir}", "seed=1"])
    dir0, dir1 = bc_module.bc_dir(cfg0), bc_module.bc_dir(cfg1)
    bc_module.ensure_bc_checkpoint(cfg0, log=lambda *_: None)
    bc_module.ensure_bc_checkpoint(cfg1, log=lambda *_: None)
    assert len(calls) == 2 and json.loads((dir0 / "bc.json").read_text())["bc_hash"] == bc_hash(cfg0)
    swap = dir0.parent / "swap"
    os.replace(dir0, swap)
    os.replace(dir1, dir0)
    os.replace(swap, dir1)
    # each folder's model is intact (its digests pass) but is the other seed's
    assert "not of" in bc_module.cache_problem(dir0)
    log = []
    bc_module.ensure_bc_checkpoint(cfg0, log=log.append)
    assert len(calls) == 3 and any("swapped or copied" in line for line in log)
    assert bc_module.cache_problem(dir0) is None


def test_an_unreadable_bc_json_is_retrained(fake_bc):
    cfg, calls = fake_bc
    model_dir = bc_module.ensure_bc_checkpoint(cfg, log=lambda *_: None)
    (model_dir.parent / "bc.json").write_text('{"demos": 1, "eval_')  # torn
    bc_module.ensure_bc_checkpoint(cfg, log=lambda *_: None)
    assert len(calls) == 2 and bc_module.cache_problem(model_dir.parent) is None
