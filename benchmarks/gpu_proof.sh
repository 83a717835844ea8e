#!/usr/bin/env bash
# The GPU proof of the smoke test, run on the H200 machine after the FA4 wheels are installed
# (../shared/gpu/stage-fa4-wheels.sh). Writes each output to $OUT (default ./gpu-proof):
#   1 healthy FA4, cold (compiles)   2 the same, warm (compile cache)   3 an invalid override
#   4 benchmarks/smoke_fa4.py        5 the install broken on purpose (nvidia-cutlass-dsl-libs-core removed)
set -u
out=${OUT:-gpu-proof}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
run() { local name=$1; shift; local t0=$EPOCHREALTIME; "$@" > "$out/$name" 2>&1; local rc=$?
        printf "%s: exit %s in %s s\n" "$name" "$rc" "$(python3 -c "print(round($EPOCHREALTIME - $t0, 1))")" | tee -a "$out/summary.txt"; }
nvidia-smi -L > "$out/summary.txt" 2>&1
run 1-cold.txt fa-doctor check -v
run 2-warm.json fa-doctor check --json
run 3-override.txt env SGLANG_FLASHATTENTION_VERSION=5 fa-doctor check --no-smoke
[ "${BENCH:-1}" = 0 ] || run 4-bench.txt timeout 300 "$py" benchmarks/smoke_fa4.py --repeat "${REPEAT:-2}" --out "$out/bench.json"
"$py" -m pip uninstall -y -q nvidia-cutlass-dsl-libs-core >> "$out/summary.txt" 2>&1
run 5-broken.txt fa-doctor check -v
cat "$out/summary.txt"
