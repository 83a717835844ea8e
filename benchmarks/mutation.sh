#!/usr/bin/env bash
# Mutation scores of the decision modules, with mutmut 3 (run by hand, not in CI; docs/testing.md).
#
#   benchmarks/mutation.sh [module ...]      modules: override requirements classify selection (default: all four)
#
# Each module is mutated in its own copy of the checkout (mutmut rewrites files: never run it in the checkout),
# against the few test files that exercise it. Scores go to $MUT_DIR/scores.md, survivors to
# $MUT_DIR/<module>/survivors.txt (`cd $MUT_DIR/<module> && mutmut show <name>` shows one).
# Environment: PYTHON (default .venv/bin/python, with mutmut installed), MUT_DIR (default /tmp/fa-doctor-mutation),
# MUT_CHILDREN (default 2: parallel mutants; keep it at or below the free cores), MUT_SRC (the tree to copy,
# default this checkout as it is on disk; a directory that is not a git checkout is copied whole).
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$root/.venv/bin/python}
out=${MUT_DIR:-/tmp/fa-doctor-mutation}
children=${MUT_CHILDREN:-2}
mutmut="$(dirname "$python")/mutmut"
[ -x "$mutmut" ] || { echo "mutmut not found beside $python: $python -m pip install 'mutmut>=3.8,<4'" >&2; exit 2; }

source_of() {
  case $1 in
    override) echo fa_doctor/diagnose/checks/override.py ;;
    requirements) echo fa_doctor/diagnose/requirements.py ;;
    classify) echo fa_doctor/knowledge/classify.py ;;  # the smoke classifier is the knowledge base's since issue 10
    selection) echo fa_doctor/diagnose/derive/selection.py ;;
    *) echo "unknown module: $1 (override, requirements, classify, selection)" >&2; exit 2 ;;
  esac
}

tests_of() {  # the tests that exercise the module; CLI-level ones build venvs, so keep the list short
  case $1 in
    override) echo '"tests/test_override.py", "tests/test_override_fuzz.py"' ;;
    requirements) echo '"tests/test_requirements.py", "tests/test_inventory.py"' ;;
    classify) echo '"tests/test_smoke_classify.py", "tests/test_explain_classify.py", "tests/test_smoke_findings.py"' ;;
    selection) echo '"tests/test_selection_unit.py", "tests/test_override.py"' ;;
  esac
}

modules=("$@")
[ ${#modules[@]} -gt 0 ] || modules=(override requirements classify selection)
mkdir -p "$out"
for module in "${modules[@]}"; do
  src=$(source_of "$module")
  work="$out/$module"
  rm -rf "$work" && mkdir -p "$work"
  from=${MUT_SRC:-$root}
  if git -C "$from" rev-parse --show-toplevel >/dev/null 2>&1; then
    # The checkout as it is (tracked and untracked files, not what .gitignore hides).
    git -C "$from" ls-files -z -co --exclude-standard \
      | (cd "$from" && tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$work"
  else
    (cd "$from" && tar --exclude=./.venv --exclude=./mutants -cf - .) | tar -xf - -C "$work"
  fi
  selected=""
  for t in $(tests_of "$module" | tr -d '",'); do
    [ -f "$work/$t" ] && selected="$selected\"$t\", "
  done
  cat >> "$work/pyproject.toml" <<TOML

[tool.mutmut]
source_paths = ["fa_doctor"]
only_mutate = ["$src"]
pytest_add_cli_args_test_selection = [${selected%, }]
pytest_add_cli_args = ["-p", "no:cacheprovider", "-q", "-x", "-n", "0"]  # -n 0: in-process, as mutmut needs
TOML
  start=$(date +%s)
  (cd "$work" && "$mutmut" run --max-children "$children" >run.log 2>&1) || true
  (cd "$work" && "$mutmut" export-cicd-stats >/dev/null && "$mutmut" results >survivors.txt 2>&1) || true
  "$python" - "$work/mutants/mutmut-cicd-stats.json" "$src" "$(($(date +%s) - start))" "$out/scores.md" <<'PY'
import json, sys
from pathlib import Path

stats_file, src, seconds, scores = sys.argv[1:]
s = json.loads(Path(stats_file).read_text())
total, killed = s["total"], s["killed"]
# Only a mutant a test catches counts: timeouts, suspicious and untested mutants do not.
score = 100.0 * killed / total if total else 0.0
row = (
    f"| `{src}` | {total} | {killed} | {score:.1f}% | survived {s['survived']}, timeout {s['timeout']}, "
    f"no tests {s['no_tests']}, suspicious {s['suspicious']} | {seconds} s |"
)
path = Path(scores)
if not path.exists() or path.stat().st_size == 0:
    path.write_text("| module | mutants | killed | score | other | time |\n|---|---|---|---|---|---|\n")
with path.open("a") as fh:
    fh.write(row + "\n")
print(row)
PY
done
