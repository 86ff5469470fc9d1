"""Entry point: `python analysis/report.py name=NAME [results_dir=...] [allow_mixed=true] [wandb=true]`.

Thin wrapper over arena.analysis.report.main (the same as `arena report ...`).
"""
import sys

from arena.analysis.report import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
