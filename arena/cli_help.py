"""`arena <verb> --help`: the verb's usage, what it does, and every key it takes with its value
and meaning. The meanings are read from where each key is defined (arena.config.field_docs):
the run config schema (arena/config/schema.py) and the argument dataclasses of sweep, search,
status, report, findings, methods, envs, eval and serve (arena/config/verb_args.py, with each
key's type; eval's and serve's sections as dotted keys, `retry.max`). A run config key shows
the value the run would get with the command line's env=, budget= and other keys, and the file
that sets it (arena.config.effective) (docs/design.md, CLI grammar and exit codes).

Printing help imports no torch, pandas or transformers: what heavy modules define (the report's
keys, the method presets) is read from their source.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from arena.config import verb_args
from arena.config.effective import SCHEMA, chosen_groups, effective_values
from arena.config.field_docs import KeyDoc, dataclass_docs, dict_literal_keys
from arena.config.load import GROUPS, group_options
from arena.config.schema import CHOICES, RunConfig
from arena.config.verb_grammar import verb_key_docs

PACKAGE_DIR = Path(__file__).resolve().parent
# Run config keys listed elsewhere or set for the user: the env= and budget= groups (listed
# under Config groups) set env.name and budget, the sweep sets arm.
HIDDEN_RUN_KEYS = ("env.name", "budget", "arm")
NOTE = "(note)"  # a KeyDoc that is a remark, printed as its text alone
# Keys a sweep sets per cell or takes as its own (its Sweep keys): not listed again as run keys.
SWEEP_SETS = ("seed", "name")


@dataclass(frozen=True)
class VerbHelp:
    usage: str
    summary: str
    # (command-line keys) -> [(section title, the keys of that section)], computed when asked for
    sections: Callable[[Sequence[str]], list[tuple[str, list[KeyDoc]]]]


def run_keys(args: Sequence[str] = (), leave_out: Sequence[str] = ()) -> list[KeyDoc]:
    """The run config's keys with the value the run would get and, when a file or the command
    line sets it, where: `steps=50 ... [configs/budget/default.yaml]`; valid values where fixed."""
    hidden = set(HIDDEN_RUN_KEYS) | set(leave_out)
    docs = [d for d in dataclass_docs(RunConfig) if d.key not in hidden]
    values, sources, problem = effective_values(args, [d.key for d in docs])
    out = []
    for d in docs:
        doc = d.doc + (f"; valid: {' | '.join(CHOICES[d.key])}" if d.key in CHOICES else "")
        if sources[d.key] != SCHEMA:
            differs = _value(values[d.key]) != _value(d.default)
            doc += f"  [{sources[d.key]}{f'; schema: {_value(d.default)}' if differs else ''}]"
        out.append(KeyDoc(d.key, values[d.key], doc))
    if problem:
        out.insert(0, KeyDoc(NOTE, None, f"note: the files' values shown, the command line does not compose ({problem})"))
    return out


def config_groups(args: Sequence[str] = (), leave_out: Sequence[str] = ()) -> list[KeyDoc]:
    chosen = chosen_groups(args)
    meaning = {"env": "the environment: configs/env/<name>.yaml (sets env.*)",
               "budget": "a size preset (steps, batch, eval, BC stop): configs/budget/<name>.yaml",
               "model": "a pretrained LLM's recipe for backend=verl: configs/model/<name>.yaml (docs/verl.md)"}
    default = {"env": "sokoban", "budget": "default", "model": None}
    return [KeyDoc(g, chosen.get(g, default[g]),
                   f"{meaning[g]}; valid: {' | '.join(group_options(g))}") for g in GROUPS if g not in leave_out]


def _run_sections(args: Sequence[str] = ()) -> list[tuple[str, list[KeyDoc]]]:
    return [(GROUPS_TITLE, config_groups(args)), (_RUN_TITLE, run_keys(args))]


_RUN_TITLE = "Run config keys (the value this command line gives; [the file that sets it])"
GROUPS_TITLE = "Config groups (key=the file this command line chooses  meaning)"


def _sweep_run_sections(args: Sequence[str] = ()) -> list[tuple[str, list[KeyDoc]]]:
    """A sweep's run keys: its Sweep keys hold env, name and seeds; each cell's seed is its own."""
    return [(GROUPS_TITLE, config_groups(args, leave_out=("env",))),
            (_RUN_TITLE + ", for every cell", run_keys(args, leave_out=SWEEP_SETS))]


def _verb_keys(name: str) -> list[KeyDoc]:
    """A verb's own keys, generated from its argument dataclass (arena.config.verb_args)."""
    return verb_key_docs(getattr(verb_args, name))


def method_names() -> list[str]:
    """The presets' names, read from arena/po/methods.py (importing arena.po imports torch)."""
    return dict_literal_keys(PACKAGE_DIR / "po" / "methods.py", "PRESET_TABLE")


def _with_methods(keys: list[KeyDoc]) -> list[KeyDoc]:
    """`method`'s line with the preset names (read from their source) as its valid values."""
    return [KeyDoc(k.key, k.default, f"{k.doc}; valid: {' | '.join(method_names())}") if k.key == "method" else k
            for k in keys]


def _search_sections(args: Sequence[str] = ()) -> list[tuple[str, list[KeyDoc]]]:
    return [("Search keys", _with_methods(_verb_keys("SearchArgs"))), *_sweep_run_sections(args)]


def _envs_sections(args: Sequence[str] = ()) -> list[tuple[str, list[KeyDoc]]]:
    return [("Subcommands", [KeyDoc("play", None, "play one episode by hand"),
                             KeyDoc("check", None, "run the expert on n episodes and report its success")]),
            ("Keys", [KeyDoc(k.key, k.default, f"{k.doc}; valid: {' | '.join(group_options('env'))}")
                      if k.key == "env" else k for k in _verb_keys("EnvsArgs")]
             + [KeyDoc("<kwarg>", None, "any other key is one of the environment's env.kwargs")])]


def _eval_sections(args: Sequence[str] = ()) -> list[tuple[str, list[KeyDoc]]]:
    """EvalArgs' keys, then `n` and `seed`: run config keys that eval reads its own way."""
    own = _verb_keys("EvalArgs") + [KeyDoc("n", None, "(int) eval episodes (eval.n)"),
                                    KeyDoc("seed", 0, "(int) the first held-out episode (the run config's seed)")]
    return [("Eval keys", own), (GROUPS_TITLE, config_groups(args, leave_out=("model",))),  # model=: eval's own key
            (_RUN_TITLE, run_keys(args, leave_out=("seed",)))]


VERB_HELP: dict[str, VerbHelp] = {
    "train": VerbHelp("arena train key=value ... [--dry-run]", "Train one RL run into `out` (default "
                      "<results_dir>/runs/<cell_id>) on the backend `backend=` names.",
                      lambda args=(): [("Train keys", _verb_keys("TrainArgs")), *_run_sections(args)]),
    "bc": VerbHelp("arena bc key=value ...", "Train (or find cached) the behaviour-cloning checkpoint of a run "
                   "config and print its report.", _run_sections),
    "sweep": VerbHelp("arena sweep dimension=NAME [key=value ...] [--dry-run]",
                      "Run every arm x env x seed cell of a grid that is not done, then print its table. Keys not "
                      "listed under Sweep keys are run config keys given to every cell; a key an arm of the grid "
                      "sets is refused (the arm's value would win).",
                      lambda args=(): [("Sweep keys", _verb_keys("SweepArgs")), *_sweep_run_sections(args)]),
    "search": VerbHelp("arena search method=NAME [key=value ...] [--dry-run]",
                       "A one-arm sweep with the stability search on (search.*).", _search_sections),
    "status": VerbHelp("arena status name=NAME [results_dir=...]", "A sweep's state read from disk alone.",
                       lambda args=(): [("Keys", _verb_keys("StatusArgs"))]),
    "report": VerbHelp("arena report name=NAME [key=value ...]", "A sweep's tables and figures.",
                       lambda args=(): [("Keys", _verb_keys("ReportArgs"))]),
    "findings": VerbHelp("arena findings [results_dir=DIR | csv=PATH] [out=DIR]",
                         "The paper's findings tested on the sweeps of a results dir: for each comparison, the "
                         "paper's number, the paired difference with its interval and verdict, the seeds, sweep, "
                         "budget and commit; a comparison no sweep holds names the command that makes it "
                         "(docs/testbed.md, Findings table).",
                         lambda args=(): [("Keys", _verb_keys("FindingsArgs"))]),
    "methods": VerbHelp("arena methods [method=NAME]", "The method presets with their resolved members and "
                        "hyperparameters.", lambda args=(): [("Keys", _with_methods(_verb_keys("MethodsArgs")))]),
    "envs": VerbHelp("arena envs play|check env=NAME [key=value ...]", "Play an environment by hand or check its "
                     "expert.", _envs_sections),
    "verl-config": VerbHelp("arena verl-config key=value ... [verl.<dotted.path>=value ...]",
                            "Print the verl trainer config of a run; verl.<path>=value keys go into verl's config.",
                            _run_sections),
    "eval": VerbHelp("arena eval key=value ...", "Evaluate a checkpoint or an OpenAI-compatible endpoint on held-out "
                     "episodes into a run folder (docs/eval.md).", _eval_sections),
    "serve": VerbHelp("arena serve model.path=DIR [key=value ...]", "Serve a checkpoint behind an OpenAI-compatible "
                      "chat endpoint (docs/eval.md).", lambda args=(): [("Keys", _verb_keys("ServeArgs"))]),
}


def _value(value) -> str:
    return "-" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def help_text(verb: str, args: Sequence[str] = ()) -> str:
    """The full `arena <verb> --help` text; `args`, the command line's other keys, choose the
    env and budget whose values the run config keys show."""
    h = VERB_HELP[verb]
    lines = [f"usage: {h.usage}", "", h.summary, "", "Exit codes: 0 success; 1 a run failed; 2 bad input (nothing run)."]
    for title, keys in h.sections(list(args)):
        width = min(34, max(len(f"{k.key}={_value(k.default)}") for k in keys) + 2)
        lines += ["", f"{title}:" if "(" in title else f"{title} (key=default  meaning):"]
        for k in keys:  # a long value (env.kwargs={...}) gets its meaning on the next line
            if k.key == NOTE:
                lines.append(f"  {k.doc}")
                continue
            pair = f"{k.key}={_value(k.default)}"
            lines += [f"  {pair:{width}s}{k.doc}"] if len(pair) < width else [f"  {pair}", f"  {'':{width}s}{k.doc}"]
    return "\n".join(lines)


def overview() -> str:
    """`arena --help`: the verbs, one line each."""
    width = max(map(len, VERB_HELP)) + 2
    return "\n".join(["usage: arena <verb> key=value ...   (arena <verb> --help: its keys; arena --version)", "",
                      "verbs:"]
                     + [f"  {verb:{width}s}{h.summary.split('. ')[0].rstrip('.')}" for verb, h in VERB_HELP.items()])
