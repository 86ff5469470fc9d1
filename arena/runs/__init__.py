"""Run folders (docs/design.md §F) and the stability criterion (§E), shared by every backend."""
from .folder import RunFolder
from .stability import collapse_reason, run_status, stability

__all__ = ["RunFolder", "collapse_reason", "run_status", "stability"]
