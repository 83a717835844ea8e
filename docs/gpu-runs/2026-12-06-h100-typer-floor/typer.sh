#!/usr/bin/env bash
# the static check beside the floor app under the host's typer and under current typer (0.29.2, which loads pydantic),
# interleaved: is the GPU host's larger ratio the typer release?
set -u
py=$(command -v python3)
unset PYTHONDONTWRITEBYTECODE
"$py" -m pip list 2>/dev/null | grep -iE "^(typer|rich|pydantic|click) "
"$py" -m pip install -q --no-index --no-deps --target /tmp/newstack .gpu-c/wheels/*.whl 2>&1 | tail -2
"$py" -m compileall -q fa_doctor /tmp/newstack 2>/dev/null
rm -rf /tmp/fake50; fake=$(PYTHONPATH=$PWD "$py" -c "
import sys; sys.path.insert(0, 'tests'); sys.path.insert(0, 'benchmarks')
from pathlib import Path; import static_stack
Path('/tmp/app.py').write_text(static_stack.APP)
print(static_stack.target(Path('/tmp/fake50'), 45))")
PYTHONPATH=/tmp/newstack "$py" -c "import typer, pydantic; print('new stack: typer', typer.__version__, 'pydantic', pydantic.VERSION)"
t() { local t0=$(date +%s%N); env "$@" > /dev/null 2>&1; echo $(( ($(date +%s%N) - t0) / 1000 )); }
for i in 1 2; do t PYTHONPATH=$PWD "$py" -m fa_doctor check --no-smoke --json --python "$fake" >/dev/null; t PYTHONPATH=/tmp/newstack:$PWD "$py" -m fa_doctor check --no-smoke --json --python "$fake" > /dev/null; done
PYTHONPATH=/tmp/newstack:$PWD "$py" -m fa_doctor check --no-smoke --json --python "$fake" | head -c 100; echo
for i in $(seq 25); do
  a=$(t PYTHONPATH=$PWD "$py" /tmp/app.py hello); b=$(t PYTHONPATH=$PWD "$py" -m fa_doctor check --no-smoke --json --python "$fake")
  c=$(t PYTHONPATH=/tmp/newstack "$py" /tmp/app.py hello); d=$(t PYTHONPATH=/tmp/newstack:$PWD "$py" -m fa_doctor check --no-smoke --json --python "$fake")
  echo "$a $b $c $d"
done | "$py" -c "
import sys, statistics as st
rows=[list(map(int,l.split())) for l in sys.stdin]
names=['floor, host typer','check, host typer','floor, typer 0.29.2','check, typer 0.29.2']
for i,n in enumerate(names):
    v=sorted(r[i] for r in rows); print(f'{n:<22} median {st.median(v)/1e3:7.1f} ms (q1 {v[6]/1e3:.1f}, q3 {v[18]/1e3:.1f})')
print(f'check/floor, host typer: pairs median {st.median(r[1]/r[0] for r in rows):.2f}x; typer 0.29.2: {st.median(r[3]/r[2] for r in rows):.2f}x')"
