#!/usr/bin/env bash
# The GPU proof of the verdict cache (issue 17), run on the H200 machine with a healthy FA4 install (as for
# benchmarks/gpu_proof.sh) and fa-doctor on PATH. A private XDG_CACHE_HOME starts empty (no compile cache, no
# verdicts). Writes each output to $OUT (default ./gpu-verdict-proof) and a table to summary.txt:
#   0 floors: python3 -c pass, the static check (x3 each)
#   1 check, cold (compiles FA4, stores the verdict)    2 check, verdict held (cached: true)
#   3 check --fresh (kernels run, warm compile cache)    4 exec -- python3 -c pass, unchanged (x3, cached)
#   5 a file of flash-attn-4 touched: exec runs the kernels (changed: dist:flash-attn-4), then holds again
#   6 a new driver version (simulated: pynvml's nvmlSystemGetDriverVersion, or nvidia-smi's driver_version column,
#     answers 999.99.99 to fa-doctor only): exec runs the kernels (changed: gpus); back on the real driver the
#     first verdict holds again (both are kept)
set -u
out=${OUT:-gpu-verdict-proof}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PYTHONUNBUFFERED=1
export XDG_CACHE_HOME="$out/cache"
rm -rf "$XDG_CACHE_HOME"
py=$(command -v "${PYTHON:-python3}") || { echo "no ${PYTHON:-python3} on PATH" >&2; exit 2; }
fad=$(command -v fa-doctor) || { echo "fa-doctor is not on PATH" >&2; exit 2; }
fadpy=${FADPY:-$(head -1 "$fad" | sed "s/^#!//")}  # the interpreter fa-doctor runs in
now() { "$fadpy" -c 'import time; print(time.time())'; }
# run NAME STREAM CMD...: STREAM is the one holding the JSON report (stdout for check, stderr for exec).
run() {
  local name=$1 stream=$2; shift 2
  local t0; t0=$(now)
  if [ "$stream" = stdout ]; then "$@" > "$out/$name" 2> "$out/$name.err"; else "$@" 2> "$out/$name" > "$out/$name.out"; fi
  local rc=$?
  local t1; t1=$(now)
  "$fadpy" - "$out/$name" "$rc" "$t0" "$t1" <<'EOF' | tee -a "$out/summary.txt"
import json, sys
path, rc, t0, t1 = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
name = path.rsplit("/", 1)[-1]
try:
    doc = json.load(open(path))
    smoke = doc.get("smoke") or {}
    extra = (f"cached={smoke.get('cached')} fingerprint={(smoke.get('fingerprint') or '')[:12]} "
             f"changed={smoke.get('changed')} smoke_ms={doc.get('timings_ms', {}).get('smoke')}")
except (OSError, ValueError):
    extra = ""
print(f"{name:<28} exit {rc:>3} in {t1 - t0:6.2f} s  {extra}")
EOF
}
floor() {  # NAME CMD...: plain timing, output kept
  local name=$1; shift
  local t0; t0=$(now); "$@" > "$out/$name" 2>&1; local rc=$?; local t1; t1=$(now)
  "$fadpy" -c "print(f'{\"$name\":<28} exit $rc in {$t1 - $t0:6.2f} s')" | tee -a "$out/summary.txt"
}

nvidia-smi -L > "$out/summary.txt" 2>&1
"$py" -c 'import importlib.metadata as m; print("flash-attn-4", m.version("flash-attn-4"), "torch", m.version("torch"))' >> "$out/summary.txt" 2>&1
for i in 1 2 3; do floor "0-pass-$i.txt" "$py" -c pass; done
for i in 1 2 3; do run "0-static-$i.json" stdout fa-doctor check --python "$py" --no-smoke --json; done
run 1-cold.json stdout fa-doctor check --python "$py" --json
run 2-held.json stdout fa-doctor check --python "$py" --json
run 3-fresh.json stdout fa-doctor check --python "$py" --fresh --json
for i in 1 2 3; do run "4-exec-held-$i.json" stderr fa-doctor exec --python "$py" --json -- "$py" -c pass; done

# 5: touch one file that flash-attn-4's RECORD lists (its mtime changes; the content does not)
file=$("$py" - <<'EOF'
import importlib.metadata as m
d = m.distribution("flash-attn-4")
print(next(str(f.locate()) for f in d.files if str(f).startswith("flash_attn/cute/") and str(f).endswith(".py")))
EOF
)
echo "touching $file" | tee -a "$out/summary.txt"
touch "$file"
run 5-exec-touched.json stderr fa-doctor exec --python "$py" --json -- "$py" -c pass
run 5-exec-held-again.json stderr fa-doctor exec --python "$py" --json -- "$py" -c pass

# 6: the driver as fa-doctor's GPU probe reads it, changed for fa-doctor only
if "$fadpy" -c 'import pynvml' 2>/dev/null; then
  echo "driver simulated through pynvml.nvmlSystemGetDriverVersion" | tee -a "$out/summary.txt"
  newdriver() { "$fadpy" -c 'import sys, pynvml
pynvml.nvmlSystemGetDriverVersion = lambda: "999.99.99"
sys.argv = ["fa-doctor", *sys.argv[1:]]
from fa_doctor.entry import main
main()' "$@"; }
else
  echo "driver simulated through an nvidia-smi wrapper on PATH" | tee -a "$out/summary.txt"
  mkdir -p "$out/fakebin"
  real=$(command -v nvidia-smi)
  printf '#!/bin/sh\n"%s" "$@" | sed -E "s/, [0-9]+[.][0-9]+([.][0-9]+)?\\r?$/, 999.99.99/"\n' "$real" > "$out/fakebin/nvidia-smi"
  chmod +x "$out/fakebin/nvidia-smi"
  newdriver() { PATH="$out/fakebin:$PATH" fa-doctor "$@"; }
fi
run 6-exec-new-driver.json stderr newdriver exec --python "$py" --json -- "$py" -c pass
run 6-exec-new-driver-held.json stderr newdriver exec --python "$py" --json -- "$py" -c pass
run 6-exec-real-driver.json stderr fa-doctor exec --python "$py" --json -- "$py" -c pass
ls -l "$XDG_CACHE_HOME/fa-doctor/verdicts" >> "$out/summary.txt" 2>&1
fa-doctor check --python "$py" 2>&1 | head -5 > "$out/7-human-held.txt"
cat "$out/7-human-held.txt" >> "$out/summary.txt"
cat "$out/summary.txt"
