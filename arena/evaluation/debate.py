"""Inference paradigms: one turn's decision from one agent (`sla`) or from a debate
(docs/eval.md, Paradigms; the protocol, its prompts and the final-action rule are stated there
and tested by hand in tests/evaluation/test_debate.py).

An agent is `agent(prompt: str) -> Reply` (one user message, one reply; no memory between
calls). Debate with K agents and R rounds, on one turn whose single-agent prompt is P:
- round 1: every agent k gets P alone and replies independently;
- round r >= 2: agent k gets P, then its own round r-1 reply, then the round r-1 replies of the
  other agents in agent order (full text, labelled "Agent j"), then the round instruction
  (cooperative, or for `aggressive_debate` an instruction to challenge the others);
- final action: a majority vote over the actions of the round-R replies that are
  format-valid (docs/methods.md, Rewards, format penalty, success); a tie goes to the tied action whose first proposer
  has the lowest agent index. The turn's response is that first proposer's round-R reply, so
  the environment and the format/action-valid flags see one ordinary reply. When no round-R
  reply is format-valid, agent 1's round-R reply is the response (an invalid turn).
Agents reply one after another inside a round (round r only starts when round r-1 is
complete), so the episode's requests never exceed one in flight.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

from arena.agent.projection import extract_action, is_format_valid

from .client import Reply

Agent = Callable[[str], Reply]

COOPERATIVE = ("Debate round {r} of {R}. Above is the task. Consider the other agents' replies, correct any "
               "mistake (theirs or yours), and give your answer again in the required format.")
AGGRESSIVE = ("Debate round {r} of {R}. Above is the task. Challenge the other agents: for each of their "
              "actions, say what is wrong with it before you decide. Do not agree with another agent unless "
              "you cannot find a flaw in its reasoning. Then give your answer in the required format.")
STYLES = {"debate": COOPERATIVE, "aggressive_debate": AGGRESSIVE}


@dataclass
class TurnDecision:
    text: str  # the reply the environment's projection sees
    replies: list = field(default_factory=list)  # [round][agent] Reply
    chosen_agent: int = 0  # 0-based index of the agent whose reply is `text`

    def proposals(self) -> list[list[str]]:
        """[round][agent] the action each reply proposes (the projection's extraction)."""
        return [[extract_action(r.text) for r in row] for row in self.replies]

    def all_replies(self) -> list[Reply]:
        return [r for row in self.replies for r in row]


def sla_turn(prompt: str, agent: Agent) -> TurnDecision:
    """The single LLM as agent: one call, its reply is the turn's response."""
    reply = agent(prompt)
    return TurnDecision(reply.text, [[reply]], 0)


def debate_prompt(base: str, r: int, rounds: int, own: str, others: Sequence[tuple[int, str]], style: str) -> str:
    """The round-r (r >= 2, 1-based) prompt of one agent. others: (1-based agent number, reply)."""
    lines = [base, "", "Your previous reply:", own, "", "The other agents' replies:"]
    lines += [f"Agent {number}: {text}" for number, text in others]
    lines += ["", STYLES[style].format(r=r, R=rounds)]
    return "\n".join(lines)


def final_choice(texts: Sequence[str]) -> int:
    """Index of the reply that decides the turn (module docstring: majority vote over the
    format-valid replies' actions, ties to the lowest-indexed first proposer; 0 if none is valid)."""
    valid = [(k, extract_action(t)) for k, t in enumerate(texts) if is_format_valid(t)]
    if not valid:
        return 0
    votes = Counter(action for _, action in valid)
    first_proposer = {}
    for k, action in valid:
        first_proposer.setdefault(action, k)
    # the most votes; among equals, the smallest first-proposer index
    best = min(votes, key=lambda action: (-votes[action], first_proposer[action]))
    return first_proposer[best]


def debate_turn(prompt: str, agents: Sequence[Agent], rounds: int, style: str) -> TurnDecision:
    """K = len(agents) agents, `rounds` rounds (module docstring)."""
    if style not in STYLES:
        raise ValueError(f"unknown debate style {style!r}; valid: {', '.join(STYLES)}")
    replies = [[agent(prompt) for agent in agents]]
    for r in range(2, rounds + 1):
        previous = [reply.text for reply in replies[-1]]
        row = []
        for k, agent in enumerate(agents):
            others = [(j + 1, text) for j, text in enumerate(previous) if j != k]
            row.append(agent(debate_prompt(prompt, r, rounds, previous[k], others, style)))
        replies.append(row)
    chosen = final_choice([reply.text for reply in replies[-1]])
    return TurnDecision(replies[-1][chosen].text, replies, chosen)
