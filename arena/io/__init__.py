"""The ground floor's file writes: atomic writes (`atomic.py`) and the kill tests' crash points
(`faults.py`). Imports nothing from arena, so every floor above may write through it."""
