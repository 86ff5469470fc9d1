"""Run folders (docs/design.md §F) and the stability criterion (§E), shared by every backend."""
from .atomic import atomic_write_json, atomic_write_text
from .folder import RunFolder
from .stability import collapse_reason, run_status, stability

__all__ = ["RunFolder", "atomic_write_json", "atomic_write_text", "collapse_reason", "run_status", "stability"]
