"""`arena <verb> --help`: the verb's usage, what it does, and every key it takes with its default
and meaning. The meanings are read from where each key is defined (arena.config.field_docs):
the run config schema (arena/config/schema.py), the sweep's own keys (arena/sweeps/sweep.py),
the eval and serve options (arena/evaluation/options.py) (docs/design.md, CLI grammar and exit
codes)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from arena.config.field_docs import KeyDoc, dataclass_docs, dict_docs


@dataclass(frozen=True)
class VerbHelp:
    usage: str
    summary: str
    # () -> [(section title, the keys of that section)], computed when the help is asked for
    sections: Callable[[], list[tuple[str, list[KeyDoc]]]]


def run_keys() -> list[KeyDoc]:
    """The run config's keys, with the valid values of those that have a fixed set."""
    from arena.config.schema import CHOICES, RunConfig

    return [KeyDoc(d.key, d.default, d.doc + (f"; valid: {' | '.join(CHOICES[d.key])}" if d.key in CHOICES else ""))
            for d in dataclass_docs(RunConfig)]


def config_groups() -> list[KeyDoc]:
    from arena.config.load import GROUPS, group_options

    meaning = {"env": "the environment's config file (sets env.*)", "budget": "a size preset (steps, batch, eval)"}
    return [KeyDoc(g, None, f"{meaning.get(g, 'a config group')}: configs/{g}/<name>.yaml; valid: "
                   f"{' | '.join(group_options(g))}") for g in GROUPS]


def _run_sections() -> list[tuple[str, list[KeyDoc]]]:
    return [("Config groups", config_groups()), ("Run config keys", run_keys())]


def _sweep_keys(leave_out: tuple[str, ...] = ()) -> list[KeyDoc]:
    from arena.sweeps import sweep

    return [d for d in dict_docs(sweep, "SWEEP_KEYS") if d.key not in leave_out]


def _methods_key() -> list[KeyDoc]:
    from arena.po.methods import METHODS

    return [KeyDoc("method", None, f"one preset (default: all); valid: {' | '.join(METHODS)}")]


def _search_sections() -> list[tuple[str, list[KeyDoc]]]:
    method = _methods_key()[0]
    return [("Search keys", [KeyDoc("method", None, method.doc.replace("one preset (default: all)", "the preset"
                                                                        " to search (required)"))]
             + _sweep_keys(leave_out=("dimension", "grid"))), *_run_sections()]


def _envs_sections() -> list[tuple[str, list[KeyDoc]]]:
    from arena.envs import ENVS

    return [("Subcommands", [KeyDoc("play", None, "play one episode by hand"),
                             KeyDoc("check", None, "run the expert on n episodes and report its success")]),
            ("Keys", [KeyDoc("env", "sokoban", f"the environment; valid: {' | '.join(sorted(ENVS))}"),
                      KeyDoc("seed", 0, "the episode seed (play)"),
                      KeyDoc("n", 100, "episodes (check)"),
                      KeyDoc("<kwarg>", None, "any other key is one of the environment's env.kwargs")])]


def _report_sections() -> list[tuple[str, list[KeyDoc]]]:
    from arena.analysis.report import KEYS

    meaning = {"name": "the sweep (results_dir/sweeps/<name>); required", "results_dir": "where the sweeps are",
               "baseline": "the arm the others are compared with", "allow_mixed": "report runs of mixed code/configs",
               "wandb": "also log the tables and figures to W&B",
               "min_effect": "points: the difference a \"no difference\" verdict must rule out (docs/methods.md, Statistics)",
               "evals": "instead of a sweep: the table of every `arena eval` run under results_dir/evals/ (docs/eval.md)"}
    defaults = {"results_dir": "results", "allow_mixed": False, "wandb": False, "evals": False, "min_effect": 5.0}
    return [("Keys", [KeyDoc(k, defaults.get(k), meaning.get(k, "")) for k in KEYS])]


def _eval_sections() -> list[tuple[str, list[KeyDoc]]]:
    from arena.evaluation import options

    own = dict_docs(options, "DEFAULTS") + [KeyDoc("n", None, "eval episodes (eval.n)"),
                                             KeyDoc("seed", 0, "the first held-out episode")]
    return [("Eval keys", own), *_run_sections()]


def _serve_sections() -> list[tuple[str, list[KeyDoc]]]:
    from arena.evaluation import options

    return [("Keys", dict_docs(options, "SERVE_DEFAULTS"))]


VERB_HELP: dict[str, VerbHelp] = {
    "train": VerbHelp("arena train key=value ...", "Train one RL run into `out` (default <results_dir>/runs/<cell_id>) "
                      "on the backend `backend=` names.", _run_sections),
    "bc": VerbHelp("arena bc key=value ...", "Train (or find cached) the behaviour-cloning checkpoint of a run "
                   "config and print its report.", _run_sections),
    "sweep": VerbHelp("arena sweep dimension=NAME [key=value ...] [--dry-run]",
                      "Run every arm x env x seed cell of a grid that is not done, then print its table. Keys not "
                      "listed under Sweep keys are run config keys given to every cell.",
                      lambda: [("Sweep keys", _sweep_keys()), *_run_sections()]),
    "search": VerbHelp("arena search method=NAME [key=value ...] [--dry-run]",
                       "A one-arm sweep with the stability search on (search.*).", _search_sections),
    "status": VerbHelp("arena status name=NAME [results_dir=...]", "A sweep's state read from disk alone.",
                       lambda: [("Keys", [KeyDoc("name", None, "the sweep; required"),
                                          KeyDoc("results_dir", "results", "where the sweeps are")])]),
    "report": VerbHelp("arena report name=NAME [key=value ...]", "A sweep's tables and figures.", _report_sections),
    "methods": VerbHelp("arena methods [method=NAME]", "The method presets with their resolved members and "
                        "hyperparameters.", lambda: [("Keys", _methods_key())]),
    "envs": VerbHelp("arena envs play|check env=NAME [key=value ...]", "Play an environment by hand or check its "
                     "expert.", _envs_sections),
    "verl-config": VerbHelp("arena verl-config key=value ... [verl.<dotted.path>=value ...]",
                            "Print the verl trainer config of a run; verl.<path>=value keys go into verl's config.",
                            _run_sections),
    "eval": VerbHelp("arena eval key=value ...", "Evaluate a checkpoint or an OpenAI-compatible endpoint on held-out "
                     "episodes into a run folder (docs/eval.md).", _eval_sections),
    "serve": VerbHelp("arena serve model.path=DIR [key=value ...]", "Serve a checkpoint behind an OpenAI-compatible "
                      "chat endpoint (docs/eval.md).", _serve_sections),
}


def _value(value) -> str:
    return "-" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def help_text(verb: str) -> str:
    """The full `arena <verb> --help` text."""
    h = VERB_HELP[verb]
    lines = [f"usage: {h.usage}", "", h.summary, "", "Exit codes: 0 success; 1 a run failed; 2 bad input (nothing run)."]
    for title, keys in h.sections():
        width = min(34, max(len(f"{k.key}={_value(k.default)}") for k in keys) + 2)
        lines += ["", f"{title} (key=default  meaning):"]
        lines += [f"  {f'{k.key}={_value(k.default)}':{width}s}{k.doc}" for k in keys]
    return "\n".join(lines)


def overview() -> str:
    """`arena --help`: the verbs, one line each."""
    width = max(map(len, VERB_HELP)) + 2
    return "\n".join(["usage: arena <verb> key=value ...   (arena <verb> --help: its keys)", "", "verbs:"]
                     + [f"  {verb:{width}s}{h.summary.split('. ')[0].rstrip('.')}" for verb, h in VERB_HELP.items()])
