"""The household learning test (docs/testbed.md, "Household: 120 steps on sorted micro-batches"):
`env=household budget=learn` (configs/env_budget/household_learn.yaml: the large pool, 8 turns,
history 1, no format penalty, a fixed 1000-step BC on the 1024 training games, 120 GRPO steps on
micro-batches sorted by length, eval on 1024 held-out games) ends >= 2.0 standard errors above
its own step-0 eval, the SE paired by game (summary.json's gain_paired_se), greedy.

Why paired and 2.0, not the two-sample 2.5 of the Sokoban and shop bars: the two evals play the
same 1024 games, so the two-sample SE counts each game's difficulty twice; paired by game the SE
is ~2x smaller. In 120 steps household gains +3.0 to +5.0 points: on seeds 0-4, 2.21 / 1.58 /
1.65 / 2.35 / 1.43 two-sample SE and 4.42 / 3.29 / 3.08 / 4.76 / 2.56 paired SE (runs HS0-HS4;
HS2 ran after the recipe was fixed, an out-of-sample check). 2.0 paired SE was chosen on the
80-step recipe's seeds 0-3 (runs HP0-HP3) before these runs; a run that did not learn (the same
wins before and after, up to noise) clears it with probability ~2% (one-sided normal tail at 2.0). Seed 4, flat at 80 steps (+0.6 points, 0.49
paired SE, run HP4), clears it at 120.

Every seed is opt-in: it runs only when this file is named on pytest's command line
(`pytest -m slow tests/embedded/test_household_learning.py`), and only when the 2304-game pool is
cached (it is skipped otherwise: the pool takes 25-50 minutes of one core to make, `arena envs
check env=household pool=large n_eval=1024`). Each seed is ~25 CPU-minutes, ~27 minutes beside
another process. The slow stage has no room for one: with household seed 0 in it, the stage
summed to ~60 minutes on the calibration machine and ran past its 72-minute limit on a slower CI
machine (docs/testbed.md, "The slow stage on two workers")."""
import pytest

from arena.envs.household_games import MANIFEST_NAME, default_cache_dir, large_pool_layout

from .learning_runs import ENDS_ONLY, assert_bar, failed_logs, named_on_command_line, run_seed

SEEDS = (0, 1, 2, 3, 4)
MARGIN_PAIRED_SE = 2.0
RUN_TIMEOUT_S = 55 * 60
POOL, _ = large_pool_layout(default_cache_dir(), n_games=1536, first_seed=1001, n_eval=1024)

pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not (POOL / MANIFEST_NAME).is_file(),
    reason=f"needs the household pool {POOL} (25-50 min to make once: "
           "arena envs check env=household pool=large n_eval=1024)")]


@pytest.fixture(autouse=True)
def seeds_run_only_when_named(request):
    seed = request.node.callspec.params["seed"]
    if not named_on_command_line(request.config, __file__):
        pytest.skip(f"seed {seed} is opt-in (~25 CPU-minutes): pytest -m slow tests/embedded/test_household_learning.py")


# What the testbed showed (docs/testbed.md, "Household: 120 steps on sorted micro-batches"), 1024
# games: HS0 38.2% -> 43.0% (+4.8 points, 4.42 paired SE), HS1 32.5 -> 35.8 (+3.3, 3.29),
# HS2 35.3 -> 38.8 (+3.5, 3.08), HS3 33.6 -> 38.6 (+5.0, 4.76), HS4 34.3 -> 37.3 (+3.0, 2.56).
# Asserted per seed: the run finishes, step 0 in the headroom [15%, 70%], n = 1024,
# p1_s - p0_s >= 2.0 paired SE_s (the mean bar follows: learning_runs.py).
@pytest.mark.parametrize("seed", SEEDS)
def test_grpo_beats_its_start_beyond_noise_on_household(seed, tmp_path):
    assert run_seed(["env=household", "budget=learn", "po.method=grpo", *ENDS_ONLY], seed, tmp_path, timeout_s=RUN_TIMEOUT_S), failed_logs([seed], tmp_path)
    assert_bar([seed], tmp_path, margin=MARGIN_PAIRED_SE, min_n=1024, paired=True)
