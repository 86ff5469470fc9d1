"""The shop environment (arena/envs/shop.py): pages, no-ops, rewards, cutoff, expert, CLI check."""
from __future__ import annotations

import pytest

from arena.agent.prompts import render_prompt
from arena.lm.tokenizer import UNK, build_tokenizer
from arena.cli import main
from arena.envs import Env, eval_seed, make
from arena.envs.commands import check
from arena.envs.shop import NO_OP_PREFIX, ShopEnv
from arena.envs.shop_pages import parse_action

GOAL_19 = "i need a laptop and travel backpack in black color, size small, price lower than 30 dollars"
QUERY_19 = "search[laptop travel backpack black small]"


@pytest.fixture(scope="module")
def env():
    return ShopEnv()


def play_expert(env, seed):
    obs, info = env.reset(seed)
    trace, done, total = [], False, 0.0
    while not done:
        action = env.expert_action()
        trace.append((obs, action, info))
        obs, reward, done, info = env.step(action)
        total += reward
    return trace, total, info


def test_registry_and_protocol(env):
    made = make("shop")
    assert isinstance(made, Env) and made.name == "shop" and made.max_turns == 15
    assert "search[" in made.instruction and "click[buy now]" in made.instruction


def test_parse_action():
    assert parse_action("click[ Buy  Now ]") == ("click", "buy now")
    assert parse_action(" Search[Warm Jacket] ") == ("search", "warm jacket")
    assert parse_action("click[]") is None and parse_action("buy now") is None and parse_action("") is None


def test_hand_worked_episode_with_a_near_miss(env):
    """Train seed 19: goal = backpack, laptop + travel, black, small, under 30 dollars.

    The first result b0593 (ember laptop travel backpack, $62; features laptop, travel,
    lightweight; colors black/red, sizes small/medium) is a near miss: over budget. Turns:
      1 'dance'           not search[]/click[]: no-op, not admissible, r = 0
      2 search[...]       the results page, b0593 first, r = 0
      3 click[b0593]      its item page, r = 0
      4 click[black]      color chosen
      5 click[large]      b0593 has no large: well-formed (admissible) but a no-op
      6 click[small]      size chosen
      7 click[buy now]    score = (2 attributes + 2 options + 0 price) / (2 + 2 + 1) = 0.8 < 1:
                          done, not won, r = 0 (the authors' WebShop pays 10 only at score 1)
    """
    obs, info = env.reset(19)
    assert obs == f"Instruction: {GOAL_19}\nSearch: type search[your query]"
    assert info["task"] == GOAL_19 and info["admissible_actions"] == ["search[...]"] and not info["won"]
    obs, reward, done, info = env.step("dance")
    assert obs.startswith(NO_OP_PREFIX) and (reward, done, info["admissible"], info["effective"]) == (0.0, False, False, False)
    obs, reward, done, info = env.step(QUERY_19)
    lines = obs.split("\n")
    assert lines[0] == "Results for 'laptop travel backpack black small', page 1 of 10:"
    assert lines[1] == "[b0593] ember laptop travel backpack $62" and lines[-1] == "[next >] [back to search]"
    assert "click[b0593]" in info["admissible_actions"] and (reward, done) == (0.0, False)
    obs, _, _, info = env.step("click[b0593]")
    assert obs.split("\n")[:4] == ["[b0593] ember laptop travel backpack $62", "features: laptop, travel, lightweight",
                                   "color: [black] [red]", "size: [small] [medium]"]
    obs, _, _, _ = env.step("click[black]")
    assert "chosen: color black" in obs
    obs, reward, done, info = env.step("click[large]")
    assert obs.startswith(NO_OP_PREFIX) and info["admissible"] and not info["effective"] and not done
    env.step("click[small]")
    obs, reward, done, info = env.step("click[buy now]")
    assert (reward, done, info["won"], info["turn"]) == (0.0, True, False, 7)
    assert info["task_score"] == pytest.approx(0.8) and obs == "You bought ember laptop travel backpack. Score 0.80."
    with pytest.raises(RuntimeError, match="reset"):
        env.step("click[buy now]")


def test_navigation_next_prev_back(env):
    env.reset(19)
    env.step(QUERY_19)
    obs, *_ = env.step("click[next >]")
    assert "page 2 of 10" in obs and "[< prev]" in obs and "[b1733] velvet laptop travel backpack $23" in obs
    obs, *_ = env.step("click[< prev]")
    assert "page 1 of 10" in obs
    obs, *_ = env.step("click[b0543]")
    obs, *_ = env.step("click[< prev]")
    assert obs.startswith("Results for")
    obs, _, _, info = env.step("click[back to search]")
    assert obs.startswith("Instruction: ") and info["page"] == "search"
    obs, *_ = env.step("search[qqqq]")
    assert obs == "No results for 'qqqq'.\n[back to search]"


def test_max_turns_cutoff():
    """max_turns=3, three searches of nothing: done only after the third, not won, r = 0."""
    env = ShopEnv(max_turns=3)
    env.reset(5)
    results = [env.step("click[buy now]") for _ in range(3)]  # no item page: no-ops
    assert [r[2] for r in results] == [False, False, True] and [r[1] for r in results] == [0.0] * 3
    assert results[-1][3]["truncated"] and not results[-1][3]["won"]


def test_expert_on_seed_19_and_split_disjointness(env):
    # the expert passes over the near miss b0593 ($62) for b0543 ($6, black, small)
    trace, total, info = play_expert(env, 19)
    assert [a for _, a, _ in trace] == [QUERY_19, "click[b0543]", "click[black]", "click[small]", "click[buy now]"]
    assert total == 10.0 and info["won"] and info["task_score"] == 1.0
    train = {env.goal_for_seed(s).target_id for s in range(300)}
    held_out = {env.goal_for_seed(eval_seed(i)).target_id for i in range(300)}
    assert not train & held_out
    assert ShopEnv().reset(eval_seed(7)) == env.reset(eval_seed(7))  # seeds reproduce


def test_expert_recovers_after_a_deviation(env):
    env.reset(19)
    env.step(QUERY_19)
    env.step("click[b0593]")  # the near miss
    assert env.expert_action() == "click[< prev]"
    total, done = 0.0, False
    while not done:
        _, reward, done, info = env.step(env.expert_action())
        total += reward
    assert info["won"] and total == 10.0


def test_check_prints_expert_success_on_many_seeds(capsys):
    """The expert won all of 6000 goals checked (3000 per split); 99% leaves room for other catalogues."""
    result = check("shop", 200)
    assert result["success_rate"] >= 0.99 and 4.5 <= result["mean_turns"] <= 6
    assert "shop: expert success" in capsys.readouterr().out
    assert main(["envs", "check", "env=shop", "n=20"]) == 0
    assert "expert success 1.000 over 20 seeds" in capsys.readouterr().out
    assert main(["envs", "check", "env=shop", "n=2", "colour=red"]) == 2


def test_demo_vocabulary_covers_held_out_prompts():
    """A wordlevel tokenizer built from 300 expert episodes on training seeds (as BC builds it)
    encodes the prompts of 100 held-out episodes without <unk>, in well under 1024 entries."""
    env = ShopEnv()

    def prompts(seeds):
        for seed in seeds:
            trace, _, _ = play_expert(env, seed)
            history = []
            for turn, (obs, action, info) in enumerate(trace):
                yield render_prompt("shop", env.instruction, obs, history, turn, task=info["task"],
                                    history_length=1, template="minimal") + f"<action>{action}</action>"
                history.append((obs, action))

    tokenizer = build_tokenizer(list(prompts(range(300))), vocab_size=1024, kind="wordlevel")
    assert len(tokenizer) < 400
    unk = tokenizer.convert_tokens_to_ids(UNK)
    held_out = list(prompts(eval_seed(i) for i in range(100)))
    assert all(unk not in tokenizer.encode(p, add_special_tokens=False) for p in held_out)
    assert max(len(tokenizer.encode(p)) for p in held_out) < 400  # fits max_positions 1024 with room


def test_other_catalogues_work_too():
    """Another catalogue seed and size: the expert still wins (>= 99% of 100 goals per split)."""
    env = ShopEnv(n_products=1000, catalogue_seed=7)
    for seeds in (range(100), [eval_seed(i) for i in range(100)]):
        wins = sum(play_expert(env, s)[2]["won"] for s in seeds)
        assert wins >= 99
