"""tests/slow_schedule.py: which slow items may run beside others, and in what order."""
from pathlib import Path
from types import SimpleNamespace

from tests.slow_schedule import SERIAL, SIDE_BY_SIDE_MINUTES, order, side_by_side_minutes, work_unit

ROOT = Path(__file__).resolve().parents[1]


def test_every_side_by_side_module_exists_and_is_slow():
    for module in SIDE_BY_SIDE_MINUTES:
        text = (ROOT / module).read_text()
        assert "pytest.mark.slow" in text and "pytestmark" in text, module


def test_learning_seeds_are_their_own_units_and_the_rest_is_one_serial_unit():
    seed = "tests/embedded/test_learning_bar.py::test_grpo_gains_over_its_start_on_held_out_seeds[7]"
    assert work_unit(seed) == seed and side_by_side_minutes(seed) == 4.5
    for nodeid in ("tests/slurm/test_cluster.py::test_job_array_runs_every_task",
                   "tests/verl/test_verl_config.py::test_every_preset_validates_through_verl[sokoban]",
                   "tests/bc/test_bc.py::test_bc_beats_the_random_init_model_on_sokoban"):
        assert work_unit(nodeid) == SERIAL and side_by_side_minutes(nodeid) is None


def test_order_keeps_the_serial_items_first_then_the_longest_seeds():
    # minutes: household 27 > shop 15 > Sokoban 4.5; serial items keep their relative order
    names = ["tests/a.py::x", "tests/embedded/test_learning_bar.py::t[0]", "tests/b.py::y",
             "tests/embedded/test_household_learning.py::t[0]", "tests/embedded/test_shop_learning.py::t[1]"]
    items = [SimpleNamespace(nodeid=n) for n in names]
    order(items)
    assert [i.nodeid for i in items] == [names[0], names[2], names[3], names[4], names[1]]
