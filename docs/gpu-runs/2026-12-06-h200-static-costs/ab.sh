#!/usr/bin/env bash
# interleaved: floor app, check, check with pynvml hidden (nvidia-smi answers), python -c pass; pycs compiled first
set -u
py=$(command -v python3)
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$PWD" > "$site/fa_doctor_tree.pth"
unset PYTHONDONTWRITEBYTECODE
pyn=$("$py" -c "import pynvml; print(pynvml.__file__)")
"$py" -m compileall -q fa_doctor "$pyn" benchmarks
rm -rf /tmp/fake50; fake=$("$py" -c "
import sys; sys.path.insert(0, 'tests'); sys.path.insert(0, 'benchmarks')
from pathlib import Path; import static_stack
Path('/tmp/app.py').write_text(static_stack.APP)
print(static_stack.target(Path('/tmp/fake50'), 45))")
t() { local t0=$(date +%s%N); "$@" > /dev/null 2>&1; echo $(( ($(date +%s%N) - t0) / 1000 )); }
"$py" -m fa_doctor check --no-smoke --json --python "$fake" | head -c 120; echo
for i in $(seq 25); do
  a=$(t "$py" /tmp/app.py hello); b=$(t "$py" -m fa_doctor check --no-smoke --json --python "$fake")
  mv "$pyn" "$pyn.h"; c=$(t "$py" -m fa_doctor check --no-smoke --json --python "$fake"); mv "$pyn.h" "$pyn"
  d=$(t "$py" -c pass); e=$(t "$py" -c "import typer, rich.console")
  echo "$a $b $c $d $e"
done | "$py" -c "
import sys, statistics as st
rows=[list(map(int,l.split())) for l in sys.stdin]
names=['floor app','check','check, pynvml hidden','python -c pass','import typer, rich.console']
med=[st.median(r[i] for r in rows)/1e3 for i in range(5)]
for n,m in zip(names,med): print(f'{n:<28} {m:7.1f} ms')
pr=lambda i: st.median(r[i]/r[0] for r in rows)
print(f'check/floor pairs median {pr(1):.2f}x; hidden/floor {pr(2):.2f}x; check/hidden {st.median(r[1]/r[2] for r in rows):.3f}')"
