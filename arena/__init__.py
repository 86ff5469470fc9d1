"""arena: ablation sweeps of agentic RL (ARLArena, arXiv 2602.21534)."""
__version__ = "0.1.0"
