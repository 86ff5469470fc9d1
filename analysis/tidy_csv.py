"""Entry point: `python analysis/tidy_csv.py export|render key=value ...` (arena.analysis.tidy_csv)."""
import sys

from arena.analysis.tidy_csv import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
