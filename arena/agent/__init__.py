"""The agent protocol: prompt templates, projection of responses to actions, and the
backend-agnostic rollout loop that produces the per-turn batch (docs/methods.md §2-§3)."""
from arena.agent.projection import Projected, project
from arena.agent.prompts import TEMPLATE_KINDS, render_prompt
from arena.agent.rollout import rollout, select_envs

__all__ = ["Projected", "TEMPLATE_KINDS", "project", "render_prompt", "rollout", "select_envs"]
