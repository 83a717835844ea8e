#!/usr/bin/env bash
# The GPU proof of issues 23 and 24: on the H200 machine with a healthy FA4 install in python3's own site-packages
# and fa-doctor on PATH. A private XDG_CACHE_HOME starts empty. Each report is kept in $OUT; summary.txt has:
#   0 the static check (x3)                  1 check, cold (compiles FA4, stores the verdict)
#   2 exec -- python3 -c pass, unchanged (x3: the verdict is reused; its time against the static check's)
#   3 FA4 reinstalled (pip --force-reinstall of the same wheel): exec runs the kernels, then holds again
#   4 a CUDA library wheel's shared object the kernels mapped, rewritten in place with its mtime put back (what an
#     upgrade of an nvidia-* wheel does to the file, without network here): exec runs the kernels
#   5 LD_PRELOAD in COMMAND (env LD_PRELOAD=...): exec runs the kernels
#   6 SGLANG_FLASHATTENTION_VERSION=5 in COMMAND: refused, no kernel run, and how long that takes
set -u
out=${OUT:-gpu-exec-proof}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export PYTHONUNBUFFERED=1 XDG_CACHE_HOME="$out/cache"
rm -rf "$XDG_CACHE_HOME"
py=$(command -v "${PYTHON:-python3}")
wheels=${WHEELS:-/root/fa4}
now() { "$py" -c 'import time; print(time.time())'; }
run() {  # NAME CMD...: the JSON report is on stdout (check) or stderr (exec)
  local name=$1; shift
  local t0; t0=$(now)
  if [ "$1" = check ]; then fa-doctor "$@" > "$out/$name" 2> "$out/$name.err"; else fa-doctor "$@" 2> "$out/$name" > "$out/$name.out"; fi
  local rc=$?; local t1; t1=$(now)
  "$py" - "$out/$name" "$rc" "$t0" "$t1" <<'PY' | tee -a "$out/summary.txt"
import json, sys
path, rc, t0, t1 = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
try:
    doc = json.load(open(path))
    smoke = doc.get("smoke") or {}
    changed = smoke.get("changed") or []
    extra = f"cached={smoke.get('cached')} changed={changed[:4]}{' ...' if len(changed) > 4 else ''}"
    extra += " failing=" + ",".join(f["id"] for f in doc["findings"] if f["severity"] == "fail")
except (OSError, ValueError, KeyError):
    extra = ""
print(f"{path.rsplit('/', 1)[-1]:<26} exit {rc:>3} in {float(t1) - float(t0):6.2f} s  {extra}")
PY
}
{ nvidia-smi -L; "$py" -c 'import importlib.metadata as m; print("flash-attn-4", m.version("flash-attn-4"), "torch", m.version("torch"), "typer", m.version("typer"))'; } > "$out/summary.txt" 2>&1
for i in 1 2 3; do run "0-static-$i.json" check --python "$py" --no-smoke --json; done
run 1-cold.json check --python "$py" --json
for i in 1 2 3; do run "2-exec-held-$i.json" exec --json -- "$py" -c pass; done

echo "3: pip install --force-reinstall --no-deps flash-attn-4 (the same wheel)" | tee -a "$out/summary.txt"
"$py" -m pip install -q --no-index --no-deps --force-reinstall "$wheels"/flash_attn_4-*.whl >> "$out/pip.txt" 2>&1
run 3-exec-reinstalled.json exec --json -- "$py" -c pass
run 3-exec-held-again.json exec --json -- "$py" -c pass

lib=$("$py" - "$XDG_CACHE_HOME" <<'PY'
import glob, json, sys
doc = json.load(open(sorted(glob.glob(sys.argv[1] + "/fa-doctor/verdicts/*.json"))[-1]))
libs = [p for p in doc["watch"] if "/nvidia/" in p and ".so" in p]
print(next((p for p in libs if "cudart" in p or "nvrtc" in p), libs[0] if libs else ""))
PY
)
echo "4: rewrite in place, mtime put back: ${lib:-no nvidia-* library was mapped}" | tee -a "$out/summary.txt"
if [ -n "$lib" ]; then
  cp -p "$lib" "$out/lib.copy" && cat "$out/lib.copy" > "$lib" && touch -r "$out/lib.copy" "$lib" && rm "$out/lib.copy"
  run 4-exec-cuda-lib.json exec --json -- "$py" -c pass
fi
pre=$("$py" -c 'import glob, os, torch; print((glob.glob(os.path.join(os.path.dirname(torch.__file__), "lib", "libgomp*.so*")) + ["/lib/x86_64-linux-gnu/libm.so.6"])[0])')
echo "5: LD_PRELOAD=$pre in COMMAND" | tee -a "$out/summary.txt"
run 5-exec-ld-preload.json exec --json -- env LD_PRELOAD="$pre" "$py" -c pass
run 6-exec-invalid-override.json exec --json -- env SGLANG_FLASHATTENTION_VERSION=5 "$py" -c pass
cat "$out/summary.txt"
