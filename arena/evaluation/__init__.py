"""Benchmarking policies against inference paradigms (docs/eval.md): `arena eval` (runner.py),
`arena serve` (server.py), the retrying chat client (client.py), the single-agent and debate
paradigms (debate.py), per-episode caching (episodes.py) and the report table (table.py)."""
