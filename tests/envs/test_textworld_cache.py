"""The bounded cache of loaded textworld envs (arena/envs/textworld_episode.py)."""
import pytest

from arena.envs import textworld_episode as twe


CLOSED = []  # names in closing order


class FakeEnv:
    def __init__(self, name):
        self.name, self.closed = name, False

    def close(self):
        self.closed = True
        CLOSED.append(self.name)


@pytest.fixture()
def small_cache(monkeypatch):
    monkeypatch.setattr(twe, "MAX_IDLE_ENVS", 3)
    monkeypatch.setattr(twe, "_IDLE_ENVS", twe.OrderedDict())
    CLOSED.clear()


def test_the_least_recently_released_envs_are_closed_beyond_the_cap(small_cache):
    # released in order a1, b1, a2, c1, d1 with a cap of 3:
    #   after c1: {a: [a1, a2], b: [b1], c: [c1]} = 4 idle > 3 -> the least recently released
    #   game is b (a was released again after b), so b1 closes: {a: [a1, a2], c: [c1]}
    #   after d1: 4 idle -> the oldest game is now a: its first env a1 closes: {a: [a2], c, d}
    envs = {n: FakeEnv(n) for n in ("a1", "b1", "a2", "c1", "d1")}
    for name in ("a1", "b1", "a2", "c1", "d1"):
        twe.release_env(name[0], envs[name])
    assert CLOSED == ["b1", "a1"]
    assert twe.idle_env_count() == 3
    started = []
    start = lambda path: started.append(path) or FakeEnv(path + "-new")  # noqa: E731
    assert twe.acquire_env("a", start) is envs["a2"]  # cached
    assert twe.acquire_env("b", start).name == "b-new" and started == ["b"]  # evicted: started anew
    assert twe.acquire_env("a", start).name == "a-new"  # a's only idle env was taken above
    assert twe.idle_env_count() == 2  # c1, d1 left


def test_under_the_cap_nothing_is_closed_and_envs_come_back_per_game(small_cache):
    first, second = FakeEnv("x1"), FakeEnv("x2")
    twe.release_env("x", first)
    twe.release_env("x", second)
    assert not first.closed and not second.closed
    assert {twe.acquire_env("x", lambda p: None), twe.acquire_env("x", lambda p: None)} == {first, second}
    assert twe.idle_env_count() == 0


def test_an_env_playing_textworld_refuses_a_turn_before_its_first_reset():
    # household and alfworld forward step, is_admissible and expert_action to the episode of the
    # last reset (PlaysTextWorld); before any reset there is none, and each call says so by name
    from arena.envs.alfworld import AlfworldEnv
    from arena.envs.household import HouseholdEnv
    from arena.envs.textworld_episode import PlaysTextWorld

    class Unreset(PlaysTextWorld):
        name = "unreset"

    assert issubclass(HouseholdEnv, PlaysTextWorld) and issubclass(AlfworldEnv, PlaysTextWorld)
    for call in (lambda env: env.step("go north"), lambda env: env.is_admissible("look"), lambda env: env.expert_action()):
        with pytest.raises(RuntimeError, match=r"call reset\(seed\) before stepping the unreset env"):
            call(Unreset())
