"""The sweep's BC stage keeps at most as many jobs running as the cells may
(sweep.sweep_parallelism: the launcher's parallelism, capped by $ARENA_MAX_PARALLEL)."""
import pytest

from arena.sweeps import runner
from arena.sweeps.sweep import build_plan, bc_configs, sweep_parallelism


class CountingExecutor:
    """A submitit stand-in: a job counts as running from submit until done() first says True,
    which happens on its `polls`-th done() call (the BC fn runs then). Records the most jobs
    running at once."""

    def __init__(self, polls: int = 3):
        self.polls, self.running, self.max_running, self.ran = polls, 0, 0, []

    def submit(self, fn):
        self.running += 1
        self.max_running = max(self.max_running, self.running)
        return CountingJob(self, fn)


class CountingJob:
    def __init__(self, executor, fn):
        self.executor, self.fn, self.calls, self.finished, self.value = executor, fn, 0, False, None

    def done(self):
        if not self.finished:
            self.calls += 1
            if self.calls >= self.executor.polls:
                self.value = self.fn()
                self.executor.ran.append(self.value)
                self.finished = True
                self.executor.running -= 1
        return self.finished

    def result(self):
        assert self.finished
        return self.value


def _bc_fn(cfg):
    return f"bc seed {cfg}"


@pytest.mark.parametrize("parallel", [1, 2, 5])
def test_bc_stage_runs_at_most_parallel_jobs(monkeypatch, parallel):
    monkeypatch.setattr(runner, "POLL_S", 0.0)
    monkeypatch.setattr(runner, "run_bc", lambda cfg, env, threads, bc_fn: bc_fn(cfg))
    executor = CountingExecutor()
    logs = []
    jobs = runner.run_bc_stage([0, 1, 2, 3, 4], executor=executor, env={}, threads=1, bc_fn=_bc_fn, wait=True,
                               log=logs.append, parallel=parallel)
    # 5 BC configs, `parallel` slots: the peak is min(parallel, 5), and every one ran and was logged
    assert executor.max_running == min(parallel, 5)
    assert len(jobs) == 5 and sorted(executor.ran) == [f"bc seed {i}" for i in range(5)]
    assert sorted(logs) == [f"[sweep] BC stage: bc seed {i}" for i in range(5)]


def test_bc_stage_without_wait_returns_the_last_window_running(monkeypatch):
    # SLURM (wait=False): 3 configs, 2 slots: the third is submitted only after one ended, and
    # the stage returns without waiting for the last ones (afterok holds the cells).
    monkeypatch.setattr(runner, "POLL_S", 0.0)
    monkeypatch.setattr(runner, "run_bc", lambda cfg, env, threads, bc_fn: bc_fn(cfg))
    executor = CountingExecutor()
    jobs = runner.run_bc_stage([0, 1, 2], executor=executor, env={}, threads=1, bc_fn=_bc_fn, wait=False,
                               log=lambda *_: None, parallel=2)
    assert executor.max_running == 2 and len(jobs) == 3
    assert executor.running >= 1  # not waited for


def test_a_failed_bc_raises(monkeypatch):
    monkeypatch.setattr(runner, "POLL_S", 0.0)

    def failing(cfg, env, threads, bc_fn):
        raise RuntimeError("no demonstrations")

    monkeypatch.setattr(runner, "run_bc", failing)

    class RaisingJob(CountingJob):
        def result(self):
            raise RuntimeError("BC job failed")

        def done(self):
            return True

    class Executor(CountingExecutor):
        def submit(self, fn):
            return RaisingJob(self, fn)

    with pytest.raises(RuntimeError, match="BC job failed"):
        runner.run_bc_stage([0, 1], executor=Executor(), env={}, threads=1, bc_fn=_bc_fn, wait=True,
                            log=lambda *_: None, parallel=1)


def test_arena_max_parallel_caps_the_local_launcher(monkeypatch):
    monkeypatch.setenv("ARENA_MAX_PARALLEL", "1")
    assert sweep_parallelism("local") == 1
    assert sweep_parallelism("debug") == 1
    monkeypatch.setenv("ARENA_MAX_PARALLEL", "many")
    with pytest.raises(ValueError, match="ARENA_MAX_PARALLEL='many'.*valid: an integer"):
        sweep_parallelism("local")


def test_execute_gives_the_bc_stage_the_cells_limit(sweep_env, monkeypatch):
    # The sweep's own BC stage gets options.parallel, the number the cells get.
    monkeypatch.setenv("ARENA_MAX_PARALLEL", "1")
    from arena.sweeps import sweep as sweep_module

    plan, options = build_plan(["dimension=aggregation", "seeds=2", "launcher=local", *sweep_env])
    assert options.parallel == 1 and len(bc_configs(plan.cells)) == 2  # one BC per seed
    seen = {}

    class Stop(Exception):
        pass

    def fake_stage(cfgs, **kw):
        seen.update(kw, n=len(cfgs))
        raise Stop

    monkeypatch.setattr(runner, "run_bc_stage", fake_stage)
    logs = []
    with pytest.raises(Stop):
        sweep_module.execute(plan, options, log=logs.append)
    assert seen["parallel"] == 1 and seen["n"] == 2 and seen["wait"] is True
    # the stage announces itself before its minutes of silence
    assert any(line.startswith("[sweep] BC stage: 2 checkpoint(s) to train or find cached, at most 1 at once")
               for line in logs), logs
