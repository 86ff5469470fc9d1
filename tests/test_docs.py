"""The README and the manual as a product (docs/testbed.md, "How the numbers are made"):
- every generated block of README.md and docs/testbed.md is what scripts/docs_numbers.py makes from the
  committed tables, and a changed table or a hand-edited number is caught;
- no run id (r45, r66b, ...) in code or configs: a comment says why, in words, and names a doc section;
- no README line over 200 characters; no "this/latest/previous session" in any doc;
- every `docs/<file>.md, "Section"` reference in code, configs, tests and docs names a heading of that file."""
from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN_ID = re.compile(r"\br\d{2,3}[a-z]?\b")
SESSION = re.compile(r"\b(this|latest|previous|last|current)\s+session\b", re.I)
REF = re.compile(r'(docs/[\w/.-]+\.md)\)?,? \(?(?:sections? )?"([^"]+)"')
TEXT_SUFFIXES = {".py", ".yaml", ".yml", ".md", ".sh", ".csv", ".toml", ""}
CITING = ("arena", "configs", "tests", "benchmarks", "scripts", "sweeps", "analysis", ".ci", "docs")


def docs_numbers():
    spec = importlib.util.spec_from_file_location("docs_numbers", ROOT / "scripts" / "docs_numbers.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def copy_docs(root: Path) -> None:
    """The files scripts/docs_numbers.py reads and writes, copied under `root`: README.md,
    docs/testbed.md and the committed tables (docs/findings, docs/figures)."""
    for rel in ("README.md", "docs/testbed.md"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, root / rel)
    for rel in ("docs/findings", "docs/figures"):
        shutil.copytree(ROOT / rel, root / rel)


def text_files(*folders: str):
    for folder in folders:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and path.suffix in TEXT_SUFFIXES and "__pycache__" not in path.parts:
                try:
                    yield path, path.read_text()
                except UnicodeDecodeError:
                    continue


def run_ids(text: str) -> list[str]:
    return RUN_ID.findall(text)


def flat(text: str) -> str:
    """One line: comment markers and indentation dropped, so a reference broken over lines reads whole."""
    return re.sub(r"\s+", " ", " ".join(re.sub(r"^\s*(#+|\*)?\s?", "", line) for line in text.splitlines()))


def references(text: str) -> list[tuple[str, str]]:
    return REF.findall(flat(text))


def headings(path: Path) -> list[str]:
    return [line.lstrip("#").strip() for line in path.read_text().splitlines() if line.startswith("#")]


def test_the_patterns_by_hand():
    # run ids: r + 2-3 digits (+ one letter), standing alone; labels of other runs and words are not ids
    assert run_ids("run r73; runs r42-r44; r66b; r35-D2") == ["r73", "r42", "r44", "r66b", "r35"]
    assert run_ids("r2 ar45 r1000 bfloat16 HR6 L-b r5x cr12") == []
    # session labels, also broken over a line
    assert SESSION.findall("in this\nsession, the latest session, a previous Session") == ["this", "latest", "previous"]
    assert SESSION.findall("the session of 2026-12-01; the same session") == []
    # a reference over two comment lines, with and without "section", and one without quotes (not checked)
    text = '# see (docs/testbed.md, "The\n# BC band") and docs/design.md, section "Report"; docs/testbed.md, BC band'
    assert references(text) == [("docs/testbed.md", "The BC band"), ("docs/design.md", "Report")]


def test_no_run_id_under_arena_or_configs():
    found = [f"{p.relative_to(ROOT)}:{i + 1}: {line.strip()[:80]}" for p, text in text_files("arena", "configs")
             for i, line in enumerate(text.splitlines()) if run_ids(line)]
    found += [f".ci/run:{i + 1}" for i, line in enumerate((ROOT / ".ci" / "run").read_text().splitlines()) if run_ids(line)]
    assert found == [], "say why in words and name the doc section instead:\n" + "\n".join(found)


def test_readme_lines_at_most_200_characters():
    long = [(i + 1, len(line)) for i, line in enumerate((ROOT / "README.md").read_text().splitlines()) if len(line) > 200]
    assert long == [], long


def test_no_relative_session_labels_in_the_docs():
    docs = [(ROOT / "README.md", (ROOT / "README.md").read_text())] + list(text_files("docs"))
    found = [f"{p.relative_to(ROOT)}: {m.group(0)!r}" for p, text in docs if p.suffix == ".md"
             for m in SESSION.finditer(text)]
    assert found == [], "use a date and a commit: " + ", ".join(found)


def test_doc_section_references_resolve():
    # the run log cites sections by their titles of its day (they are its own files now); run tables'
    # sources are checked by tests/analysis/test_findings.py; this file's examples are not references
    sources = [(p, t) for p, t in text_files(*CITING) if p.suffix != ".csv" and "log" not in p.relative_to(ROOT).parts[:2]
               and p != Path(__file__).resolve()] + [(ROOT / "README.md", (ROOT / "README.md").read_text())]
    missing = []
    for path, text in sources:
        for doc, section in references(text):
            target = ROOT / doc
            if not target.exists() or not any(h.startswith(section.rstrip(".,;")) for h in headings(target)):
                missing.append(f"{path.relative_to(ROOT)}: {doc}, {section!r}")
    assert missing == [], "\n".join(missing)


def test_generated_blocks_agree_with_their_tables():
    assert docs_numbers().differences(ROOT) == [], "run: python scripts/docs_numbers.py"


def test_a_changed_table_or_a_hand_edited_number_is_caught(tmp_path):
    copy_docs(tmp_path)
    dn = docs_numbers()
    assert dn.differences(tmp_path) == []
    # a figure's value changes in its table: the README's and the manual's figures blocks disagree
    csv = tmp_path / "docs" / "figures" / "current_figures.csv"
    csv.write_text(csv.read_text().replace("main job: wall time,26.1,", "main job: wall time,26.2,"))
    assert dn.differences(tmp_path) == ["README.md: block 'figures'", "docs/testbed.md: block 'figures-all'"]
    dn.write(tmp_path)
    assert "**26.2 min**" in (tmp_path / "README.md").read_text() and dn.differences(tmp_path) == []
    # a number typed into a generated block by hand
    readme = tmp_path / "README.md"
    readme.write_text(readme.read_text().replace("-2.5 [-4.9, -0.03]", "-3.5 [-4.9, -0.03]"))
    assert dn.differences(tmp_path) == ["README.md: block 'found'"]


def test_a_new_run_table_and_one_command_update_the_readme(tmp_path):
    """What a new study does: commit its run table, point a figures row at it, run the script once."""
    copy_docs(tmp_path)
    # a new sweep: the three-arm collapse-regime sweep's 21 runs (seeds 0-6) under another name and not
    # marked calibration. F1 and F2 compare `collapsed`: CISPO fell on all 7 seeds, GRPO and CISPO_SM on
    # none, so each difference is +100 (-100) on every seed; the tied sign-flip p = 2 / 2^7 = 0.016 <
    # 0.05 for each (a family of one: the SAPO members have no runs) -> 2 of 2 resolved, and both reach
    # the README's findings block (which leaves out a sweep marked calibration)
    import pandas as pd
    runs = pd.read_csv(ROOT / "docs" / "findings" / "clip3-mb16_runs.csv", dtype=str, keep_default_na=False)
    runs = runs.assign(sweep="new-job", calibration="").to_csv(index=False)
    (tmp_path / "docs" / "findings" / "new-job_runs.csv").write_text(runs)
    figures = tmp_path / "docs" / "figures" / "current_figures.csv"
    figures.write_text(figures.read_text() + "new job: what it resolved,=resolved:new-job,,2026-12-08,abc1234,B,docs/log/x.md\n")
    dn = docs_numbers()
    # (the README's findings block too: the new table resolves two of the paper's findings)
    assert set(dn.differences(tmp_path)) == {"README.md: block 'figures'", "README.md: block 'found'",
                                             "docs/testbed.md: block 'figures-all'",
                                             "docs/testbed.md: block 'findings'", "docs/testbed.md: block 'grpo-evidence'",
                                             "docs/findings/findings.md", "docs/findings/findings.csv"}
    dn.write(tmp_path)
    assert dn.differences(tmp_path) == []
    readme = (tmp_path / "README.md").read_text()
    assert "| new job: what it resolved | **2 of 2 comparisons resolved (`new-job`, seeds 0-6)** | 2026-12-08 |" in readme
    assert "  - CISPO - GRPO on `collapsed` +100.0 [+100.0, +100.0] points, **better** (F1, agrees with the paper; " \
           "`new-job`, seeds 0-6, ba93a90)" in readme
    assert "| `new-job` | stress@f15d5c35 | ba93a90 | 0-6 |" in (tmp_path / "docs" / "testbed.md").read_text()


def test_learning_bars_by_hand(tmp_path):
    """One run, p0 = 0.5 -> p1 = 0.6 on n = 100 episodes, gain_paired_se 0.03: gain +10.0 points;
    two-sample SE = sqrt(0.5 * 0.5 / 100 + 0.6 * 0.4 / 100) = sqrt(0.0049) = 0.07, so 0.1 / 0.07 = 1.43;
    paired 0.1 / 0.03 = 3.33. A run table without gain_paired_se gives no row."""
    folder = tmp_path / "docs" / "findings"
    folder.mkdir(parents=True)
    (folder / "a_runs.csv").write_text("sweep,env,seed,initial_eval_success,final_eval_success,n_eval\n"
                                       "a,sokoban,0,0.5,0.6,100\n")
    (folder / "b_runs.csv").write_text("sweep,env,machine,seed,initial_eval_success,final_eval_success,n_eval,gain_paired_se\n"
                                       "b,shop,C,3,0.5,0.6,100,0.03\n")
    lines = docs_numbers().learning_bars(tmp_path).splitlines()
    assert lines[2:] == ["| `b` | shop | C | 3 | 50.0% -> 60.0% (100) | +10.0 | 1.43 | 3.33 |"]
