"""`python -m tests.sweeps.fake_driver key=value ...`: `arena sweep` with the fake train fn, as
its own process (so tests can run two at once or kill -9 it)."""
import sys

from arena.sweeps.cli import sweep_main
from tests.sweeps import fake_train

if __name__ == "__main__":
    sys.exit(sweep_main(sys.argv[1:], train_fn=fake_train.train, bc_fn=fake_train.bc))
