"""Analysis (docs/design.md, Report): tidy frames of run folders, paper-style tables with honest statistics,
the paper's figures, and a W&B dashboard spec. Entry points: write_report, print_summary_table."""
from .frames import runs_frame, tidy_frame
from .report import print_summary_table, write_report

__all__ = ["print_summary_table", "runs_frame", "tidy_frame", "write_report"]
