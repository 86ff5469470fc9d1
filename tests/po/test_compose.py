"""The composer: preset resolution, override rules, bad input, and the objective's arithmetic."""
import pytest
import torch

from arena.po import ADV, AGG, CLIP, FILTER, METHODS, SEQ_MASK, seq_mask  # the documented import surface
from arena.po.aggregation import AggNorm
from arena.po.compose import PO_FIELDS, ResolvedPO, collect_step_groups, objective, policy_loss, resolve

# The paper's table, dimension by dimension (docs/methods.md, Presets). Written out independently of
# methods.py so that a silent change of a preset fails here.
EXPECTED = {
    #            aggregation            clipping  mask   filtering  advantage
    "grpo":     ("token_mean",          "ppo",   None,  "none",    "grpo"),
    "grpo_st":  ("seq_mean_token_mean", "ppo",   None,  "none",    "grpo"),
    "gspo":     ("token_mean",          "gspo",  None,  "none",    "grpo"),
    "cispo":    ("token_mean",          "cispo", None,  "none",    "grpo"),
    "sapo":     ("token_mean",          "sapo",  None,  "none",    "grpo"),
    "cispo_sm": ("token_mean",          "cispo", 3e-3,  "none",    "grpo"),
    "sapo_sm":  ("token_mean",          "sapo",  3e-3,  "none",    "grpo"),
    "gigpo":    ("token_mean",          "ppo",   None,  "none",    "gigpo"),
    "empg":     ("token_mean",          "ppo",   None,  "none",    "empg"),
    "grpo_ds":  ("token_mean",          "ppo",   None,  "dynamic", "grpo"),
    "gigpo_ds": ("token_mean",          "ppo",   None,  "dynamic", "gigpo"),
    "sampo":    ("token_mean",          "gspo",  None,  "dynamic", "gigpo"),
}


def test_import_surface_has_every_registry():
    assert set(AGG) == {"token_mean", "seq_mean_token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm"}
    assert set(CLIP) == {"ppo", "gspo", "cispo", "sapo"}
    assert set(FILTER) == {"none", "dynamic"}
    assert set(ADV) == {"grpo", "gigpo", "empg"}
    assert callable(seq_mask)
    assert set(SEQ_MASK) == {"none", "neg_adv_kl"}


def test_sequence_mask_is_a_member_with_its_own_hyperparameter():
    # cispo_sm = cispo + the neg_adv_kl mask at delta 3e-3 (the authors' scripts)
    po = resolve({"method": "cispo_sm"})
    assert (po.seq_mask, po.member_hp("seq_mask"), po.seq_mask_delta) == ("neg_adv_kl", {"seq_mask_delta": 3e-3}, 3e-3)
    # switching the mask off drops its hyperparameter; the clip's stay
    off = resolve({"method": "cispo_sm", "seq_mask": "none"})
    assert (off.seq_mask_delta, off.hp) == (None, {"eps_low": 1.0, "eps_high": 0.2})
    # turning it on for any method takes po.hp.seq_mask_delta; the flat config records it twice
    on = resolve({"method": "grpo", "seq_mask": "neg_adv_kl", "hp": {"seq_mask_delta": 0.1}})
    assert on.flat()["po.seq_mask"] == "neg_adv_kl" and on.flat()["po.seq_mask_delta"] == 0.1
    assert on.flat()["po.hp.seq_mask_delta"] == 0.1
    # with the mask off the hyperparameter is unknown: an error, not a silent no-op
    with pytest.raises(ValueError, match=r"unknown hyperparameter\(s\) \['seq_mask_delta'\]"):
        resolve({"method": "grpo", "hp": {"seq_mask_delta": 0.1}})
    with pytest.raises(ValueError, match="unknown seq_mask 'kl'; valid: neg_adv_kl, none"):
        resolve({"method": "grpo", "seq_mask": "kl"})


@pytest.mark.parametrize("name", list(EXPECTED))
def test_every_preset_composes_to_its_table_row(name):
    po = resolve({"method": name})
    assert (po.aggregation, po.clipping, po.seq_mask_delta, po.filtering, po.advantage) == EXPECTED[name]
    assert po.group == METHODS[name].group
    # every hyperparameter the preset sets is accepted by one of its members
    assert set(po.hp) == set(METHODS[name].hp)


def test_preset_values_follow_the_spec():
    # CISPO: no lower bound, eps_high 0.2 (docs/methods.md §5.3); SAPO temp_2; SAPO_SM 1.0/1.05 (§5.4)
    assert resolve({"method": "cispo"}).hp == {"eps_low": 1.0, "eps_high": 0.2}
    assert resolve({"method": "sapo"}).hp == {"tau_pos": 2.0, "tau_neg": 2.1}
    assert resolve({"method": "sapo_sm"}).hp == {"tau_pos": 1.0, "tau_neg": 1.05, "seq_mask_delta": 3e-3}
    sampo = resolve({"method": "sampo"})
    assert sampo.hp["max_gen_batches"] == 2 and sampo.hp["gamma"] == 0.95 and sampo.hp["mode"] == "mean_std_norm"
    assert resolve({"method": "grpo_ds"}).hp["max_gen_batches"] == 3


@pytest.mark.parametrize("name", list(EXPECTED))
def test_no_dimension_changes_another(name):
    # Overriding one member leaves the other three exactly as the preset had them.
    base = resolve({"method": name})
    for dim, alt in [("aggregation", "seq_mean_token_sum"), ("clipping", "sapo"), ("filtering", "dynamic"), ("advantage", "empg")]:
        po = resolve({"method": name, dim: alt})
        assert getattr(po, dim) == alt
        for other in ("aggregation", "clipping", "filtering", "advantage", "seq_mask", "seq_mask_delta"):
            if other != dim:
                assert getattr(po, other) == getattr(base, other), (name, dim, other)


def test_replacing_a_member_drops_its_hyperparameters():
    # cispo's eps_low=1.0 belongs to the cispo member; switching to ppo must not carry it over.
    po = resolve({"method": "cispo", "clipping": "ppo"})
    assert "eps_low" not in po.hp and "eps_high" not in po.hp
    # sapo's taus would be unknown to gspo: dropped, not an error
    assert resolve({"method": "sapo", "clipping": "gspo"}).hp == {}


def test_resolution_order_preset_then_env_then_overrides():
    env = {
        "clipping": {"gspo": {"eps_low": 3e-3, "eps_high": 4e-3}},
        "filtering": {"dynamic": {"filter_key": "won"}},
        "methods": {"sampo": {"eps_low": 0.2, "eps_high": 0.2}},
    }
    gspo = resolve({"method": "gspo"}, env)
    assert (gspo.hp["eps_low"], gspo.hp["eps_high"]) == (3e-3, 4e-3)  # member-scoped env default
    sampo = resolve({"method": "sampo"}, env)
    assert (sampo.hp["eps_low"], sampo.hp["eps_high"]) == (0.2, 0.2)  # method entry beats member entry
    assert sampo.hp["filter_key"] == "won"
    # explicit override beats both
    assert resolve({"method": "sampo", "hp": {"eps_low": 0.01}}, env).hp["eps_low"] == 0.01
    # env defaults of a member not chosen are ignored (grpo uses ppo, not gspo)
    assert resolve({"method": "grpo"}, env).hp["eps_low"] == 0.2


def test_bad_names_and_keys_list_the_valid_ones():
    with pytest.raises(ValueError, match="valid: grpo, grpo_st, gspo"):
        resolve({"method": "gpro"})
    with pytest.raises(ValueError, match="unknown clipping 'clip'.*cispo, gspo, ppo, sapo"):
        resolve({"clipping": "clip"})
    with pytest.raises(ValueError, match=r"unknown hyperparameter\(s\) \['tau'\].*valid: .*eps_high"):
        resolve({"method": "gspo", "hp": {"tau": 1.0}})
    with pytest.raises(ValueError, match="unknown po key"):
        resolve({"methd": "grpo"})
    with pytest.raises(ValueError, match="agg_norm"):
        resolve({"agg_norm": "local"})
    with pytest.raises(ValueError, match="po_defaults section"):
        resolve({}, {"clip": {}})


def _toy():
    # Two rows: A=+2 with 2 tokens, A=-1 with 1 token (second position padded).
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    adv = torch.tensor([[2.0, 2.0], [-1.0, -1.0]], dtype=torch.float64)
    logp = torch.log(torch.full((2, 2), 0.5, dtype=torch.float64)).requires_grad_()
    return logp, mask, adv


def test_objective_arithmetic_on_a_hand_example():
    logp, mask, adv = _toy()
    old = logp.detach().clone()
    ent = torch.full((2, 2), 0.5, dtype=torch.float64)
    # ratio = 1 everywhere, inside every clip band -> per-token loss = -A:
    #   tokens (-2, -2 | +1); token_mean = (-2 - 2 + 1) / 3 = -1.
    #   seq_mean_token_mean = ((-2 - 2)/2 + 1/1) / 2 = -0.5.
    # ref = logp -> k3 = exp(0) - 0 - 1 = 0.  entropy 0.5 everywhere -> H = 0.5 in both modes.
    # total = pg + 0.01*0 - 0.1*0.5 = pg - 0.05.
    for method, pg_expected in [("grpo", -1.0), ("grpo_st", -0.5)]:
        po = resolve({"method": method})
        out = objective(po, logp, old, adv, mask, ref_logp=old, entropy=ent, kl_coef=0.01, entropy_coef=0.1)
        assert out.pg.item() == pytest.approx(pg_expected, abs=1e-12)
        assert out.kl.item() == pytest.approx(0.0, abs=1e-12)
        assert out.entropy.item() == pytest.approx(0.5, abs=1e-12)
        assert out.total.item() == pytest.approx(pg_expected - 0.05, abs=1e-12)
        assert out.metrics["actor/off_policy_kl"] == 0.0 and out.metrics["actor/entropy"] == 0.5


def test_global_norm_accumulates_and_per_microbatch_averages():
    logp, mask, adv = _toy()
    old = logp.detach().clone()
    po_global = resolve({"method": "grpo"})
    norm = AggNorm.of(mask)  # 3 tokens, 2 sequences
    parts = [objective(po_global, logp[i : i + 1], old[i : i + 1], adv[i : i + 1], mask[i : i + 1], norm=norm, micro_batches=2) for i in range(2)]
    # global: (-4)/3 + (+1)/3 = -1 = the full-batch token mean
    assert sum(p.total.item() for p in parts) == pytest.approx(-1.0, abs=1e-12)
    po_local = resolve({"method": "grpo", "agg_norm": "per_microbatch"})
    parts = [objective(po_local, logp[i : i + 1], old[i : i + 1], adv[i : i + 1], mask[i : i + 1], norm=norm, micro_batches=2) for i in range(2)]
    # per micro-batch (the authors' GA): (1/2)(-4/2) + (1/2)(1/1) = -0.5, not -1
    assert sum(p.total.item() for p in parts) == pytest.approx(-0.5, abs=1e-12)


def test_sequence_mask_counts_and_removes_rows():
    # Row 1 has A<0 and mean(old - logp) = log(0.5) - log(0.25) = ln 2 > delta -> rejected.
    mask = torch.ones(2, 2, dtype=torch.float64)
    adv = torch.tensor([[1.0, 1.0], [-1.0, -1.0]], dtype=torch.float64)
    old = torch.log(torch.full((2, 2), 0.5, dtype=torch.float64))
    logp = torch.log(torch.tensor([[0.5, 0.5], [0.25, 0.25]], dtype=torch.float64))
    pg, metrics = policy_loss(resolve({"method": "cispo_sm"}), logp, old, adv, mask)
    assert metrics["actor/masked_seqs"] == 1.0
    # only row 0 remains in the numerator; the global denominator keeps all 4 tokens (§A):
    # cispo loss_tok = -sg(clip(1)) * A * logp = -log(0.5) per token -> (2 * ln2) / 4
    assert pg.item() == pytest.approx(2 * 0.6931471805599453 / 4, abs=1e-12)


def test_shape_mismatch_is_a_clear_error():
    logp, mask, adv = _toy()
    with pytest.raises(ValueError, match="same"):
        objective(resolve({"method": "grpo"}), logp, logp.detach(), adv[:1], mask)


@pytest.mark.parametrize("name", list(EXPECTED))
def test_a_resolved_po_round_trips_as_plain_data(name):
    # what the verl backend carries in its loss config: every field, and back to an equal object
    po = resolve({"method": name, "agg_norm": "per_microbatch"})
    data = po.to_dict()
    assert set(data) == set(PO_FIELDS) and type(data["hp"]) is dict
    assert data["filtering"] == EXPECTED[name][3] and data["advantage"] == EXPECTED[name][4]
    assert ResolvedPO.from_dict(data) == po


def test_from_dict_refuses_what_resolve_refuses():
    good = resolve({"method": "gigpo_ds"}).to_dict()
    with pytest.raises(ValueError, match=r"missing \['advantage'\], unknown \[\]"):
        ResolvedPO.from_dict({k: v for k, v in good.items() if k != "advantage"})
    with pytest.raises(ValueError, match="unknown filtering 'dyn'; valid: dynamic, none"):
        ResolvedPO.from_dict({**good, "filtering": "dyn"})
    with pytest.raises(ValueError, match="unknown agg_norm 'local'; valid: global, per_microbatch"):
        ResolvedPO.from_dict({**good, "agg_norm": "local"})
    # GiGPO's gamma with the advantage swapped to grpo: no member takes it
    with pytest.raises(ValueError, match=r"unknown hyperparameter\(s\) \['gamma', 'mode', 'step_w'\]"):
        ResolvedPO.from_dict({**good, "advantage": "grpo"})


def test_what_the_backends_ask_the_composer():
    # agg_norm=global: micro-batch losses add up (scale 1); per_microbatch: mean of 4 -> 1/4
    assert resolve({"method": "grpo"}).global_norm and resolve({"method": "grpo"}).micro_batch_scale(4) == 1.0
    local = resolve({"method": "grpo", "agg_norm": "per_microbatch"})
    assert not local.global_norm and local.micro_batch_scale(4) == 0.25
    # EMPG reads the old policy's entropy (docs/methods.md §4.3); GRPO does not
    assert "entropy" in resolve({"method": "empg"}).advantage_reads()
    assert "entropy" not in resolve({"method": "grpo"}).advantage_reads()


def test_collect_step_groups_runs_the_chosen_filter_with_its_hp():
    # one group of two trajectories, both won (a uniform group): dynamic filtering drops it on
    # every try, so grpo_ds with max_gen_batches=2 makes 2 tries; grpo (filtering none) makes 1
    from arena.po.types import make_batch

    calls = []

    def rollout(try_idx):
        calls.append(try_idx)
        return make_batch(group_id=[0, 0], traj_id=[0, 1], turn_idx=[0, 0], turn_reward=[1.0, 1.0],
                          episode_return=[1.0, 1.0], score=[1.0, 1.0], format_valid=[True] * 2,
                          action_valid=[True] * 2, won=[True, True])
    dynamic = resolve({"method": "grpo_ds", "hp": {"max_gen_batches": 2}})
    _, stats = collect_step_groups(dynamic, rollout, needed_groups=1, step=1)
    assert calls == [0, 1] and stats["tries"] == 2
    calls.clear()
    _, stats = collect_step_groups(resolve({"method": "grpo"}), rollout, needed_groups=1, step=1)
    assert calls == [0] and stats["tries"] == 1 and stats["kept_group_frac"] == 1.0
