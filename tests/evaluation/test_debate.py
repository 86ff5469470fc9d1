"""The debate protocol (docs/eval.md, Paradigms) checked by hand with scripted agents: who sees
what in which round, and the final-action rule."""
from __future__ import annotations

import pytest

from arena.evaluation.client import Reply
from arena.evaluation.debate import AGGRESSIVE, COOPERATIVE, debate_turn, final_choice, sla_turn


def say(action: str, why: str = "plan") -> str:
    return f"<think>{why}</think><action>{action}</action>"


class Scripted:
    """Replies with its script, one entry per call, and records every prompt it is given."""

    def __init__(self, *script: str):
        self.script, self.seen = list(script), []

    def __call__(self, prompt: str) -> Reply:
        self.seen.append(prompt)
        return Reply(self.script[len(self.seen) - 1], prompt_tokens=10, completion_tokens=2)


BASE = "Board:\n#P_#\nReply as <think>...</think><action>...</action>"


def test_two_rounds_who_sees_what_and_majority():
    a = Scripted(say("up", "a1"), say("down", "a2"))
    b = Scripted(say("down", "b1"), say("down", "b2"))
    c = Scripted(say("up", "c1"), say("left", "c2"))
    decision = debate_turn(BASE, [a, b, c], rounds=2, style="debate")
    # round 1: each agent sees the single-agent prompt and nothing else
    assert [x.seen[0] for x in (a, b, c)] == [BASE, BASE, BASE]
    # round 2, agent 1 (a): the prompt, its own round-1 reply, then agents 2 and 3's round-1 replies
    # in agent order, then the cooperative instruction for round 2 of 2 -- written out by hand:
    expected_a = (BASE + "\n\nYour previous reply:\n<think>a1</think><action>up</action>\n\n"
                  "The other agents' replies:\nAgent 2: <think>b1</think><action>down</action>\n"
                  "Agent 3: <think>c1</think><action>up</action>\n\n" + COOPERATIVE.format(r=2, R=2))
    assert a.seen[1] == expected_a
    # agent 2 (b) sees agents 1 and 3, never itself among the others
    assert "Agent 1: <think>a1</think>" in b.seen[1] and "Agent 3: <think>c1</think>" in b.seen[1]
    assert "Agent 2:" not in b.seen[1] and b.seen[1].count("<think>b1</think>") == 1
    # nobody sees another agent's round-2 reply in round 2 (replies are simultaneous)
    assert all("2</think>" not in x.seen[1] for x in (a, b, c))
    # final rule: round-2 actions down, down, left -> "down" (2 votes); its first proposer is
    # agent 1 (index 0), whose round-2 reply becomes the turn's response
    assert decision.chosen_agent == 0 and decision.text == say("down", "a2")
    assert decision.proposals() == [["up", "down", "up"], ["down", "down", "left"]]
    assert len(decision.all_replies()) == 6  # 3 agents x 2 rounds: every call is counted


def test_tie_break_and_invalid_replies():
    # K=4 final actions left, up, up, left: 2-2 tie; first proposers: left -> agent 0, up -> agent 1
    assert final_choice([say("left"), say("up"), say("up"), say("left")]) == 0
    # an invalid reply does not vote: "junk" (no tags) and a doubled tag; valid: up (1), down (2) -> tie,
    # the earlier first proposer (index 1) wins
    assert final_choice(["junk <action>left</action>", say("up"), say("down"), say("left") + say("left")]) == 1
    # majority beats order: down has 2 valid votes at indices 1 and 2, up has 1 at index 0
    assert final_choice([say("up"), say("down"), say("down")]) == 1
    # no valid reply: agent 1 (index 0) decides, and its reply stays invalid for the env
    assert final_choice(["nothing", "<action>up", ""]) == 0


def test_three_rounds_see_only_the_previous_round_and_aggressive_wording():
    agents = [Scripted(say("up", f"x{k}1"), say("up", f"x{k}2"), say("right", f"x{k}3")) for k in range(2)]
    decision = debate_turn(BASE, agents, rounds=3, style="aggressive_debate")
    third = agents[0].seen[2]
    # round 3 shows the round-2 replies (own and other), not round 1's
    assert "<think>x02</think>" in third and "<think>x12</think>" in third
    assert "x01" not in third and "x11" not in third
    assert third.endswith(AGGRESSIVE.format(r=3, R=3)) and COOPERATIVE.format(r=3, R=3) not in third
    assert agents[1].seen[1].endswith(AGGRESSIVE.format(r=2, R=3))
    assert decision.text == say("right", "x03") and decision.chosen_agent == 0


def test_one_round_is_a_vote_and_sla_is_one_call():
    agents = [Scripted(say("left")), Scripted(say("up")), Scripted(say("up"))]
    decision = debate_turn(BASE, agents, rounds=1, style="debate")
    assert [len(x.seen) for x in agents] == [1, 1, 1] and decision.chosen_agent == 1
    single = Scripted(say("down"))
    out = sla_turn(BASE, single)
    assert single.seen == [BASE] and out.text == say("down") and out.proposals() == [["down"]]
    with pytest.raises(ValueError, match="valid: debate, aggressive_debate"):
        debate_turn(BASE, agents, rounds=1, style="shouting")
