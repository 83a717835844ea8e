#!/usr/bin/env bash
# where the static check's extra time goes on a GPU node: pynvml in the early thread vs nvidia-smi
set -u
py=$(command -v python3)
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$PWD" > "$site/fa_doctor_tree.pth"
pyn=$("$py" -c "import pynvml; print(pynvml.__file__)")
echo "--- import pynvml"
"$py" -X importtime -c "import pynvml" 2>&1 | tail -3
for i in 1 2 3; do "$py" -c "import time; t=time.perf_counter(); import pynvml; a=time.perf_counter(); pynvml.nvmlInit(); b=time.perf_counter(); print(f'import {1e3*(a-t):.1f} ms init {1e3*(b-a):.1f} ms')"; done
fake=$("$py" -c "
import sys; sys.path.insert(0, 'tests'); sys.path.insert(0, 'benchmarks')
from pathlib import Path; import static_stack
print(static_stack.target(Path('/tmp/fake50'), 45))")
echo "--- timeline, fake 50-dist target (what static_stack times)"
"$py" benchmarks/static_timeline.py --runs 9 --python "$fake" 2>&1 | tail -15
echo "--- static_stack as is"
"$py" benchmarks/static_stack.py --runs 9 2>&1 | tail -6
echo "--- timeline as is"
"$py" benchmarks/static_timeline.py --runs 7 --python "$py" 2>&1 | tail -15
echo "--- static_stack, pynvml hidden (nvidia-smi answers)"
mv "$pyn" "$pyn.hidden"; "$py" benchmarks/static_stack.py --runs 9 2>&1 | tail -6
echo "--- timeline, fake target, pynvml hidden"
"$py" benchmarks/static_timeline.py --runs 9 --python "$fake" 2>&1 | tail -15
echo "--- timeline, pynvml hidden"
"$py" benchmarks/static_timeline.py --runs 7 --python "$py" 2>&1 | tail -15; mv "$pyn.hidden" "$pyn"
echo "--- real node check and fake target: HEAD (base) vs this tree, interleaved 9 pairs"
for t in "$py" "$fake"; do
for i in $(seq 9); do
  t0=$(date +%s.%N); PYTHONPATH=$PWD/.gpu-c/base "$py" -m fa_doctor check --no-smoke --json --python "$t" > /dev/null 2>&1; t1=$(date +%s.%N)
  PYTHONPATH=$PWD "$py" -m fa_doctor check --no-smoke --json --python "$t" > /dev/null 2>&1; t2=$(date +%s.%N)
  "$py" -c "print(f'base {1e3*($t1-$t0):.1f} ms  new {1e3*($t2-$t1):.1f} ms')"
done
done
