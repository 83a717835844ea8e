#!/usr/bin/env bash
# The GPU proof of issue 14: the real sglang 0.5.23 wheel installed with --no-deps over the machine's torch
# (2.11 on the H200), next to FA4 (../shared/gpu/stage-fa4-wheels.sh). Writes each output to $OUT:
#   1 check (human, -v)   2 check --json   3 check --attention-backend fa4 (SGLang's vendored FA4: the smoke
#   test imports sglang, which dies on orjson)   4 fix --plan   5 explain of the orjson error with --python
# Usage on the GPU host: SGLANG_WHEEL=path/to/sglang-0.5.23-*.whl bash benchmarks/gpu_sglang_proof.sh
set -u
out=${OUT:-gpu-sglang-proof}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
py=${PYTHON:-python3}
if [ -n "${SGLANG_WHEEL:-}" ]; then
  "$py" -m pip install -q --no-index --no-deps "$SGLANG_WHEEL" > "$out/install.txt" 2>&1
fi
run() { local name=$1; shift; local t0=$EPOCHREALTIME; "$@" > "$out/$name" 2>&1; local rc=$?
        printf "%s: exit %s in %s s\n" "$name" "$rc" "$(python3 -c "print(round($EPOCHREALTIME - $t0, 1))")" | tee -a "$out/summary.txt"; }
{ nvidia-smi -L; "$py" -m pip list 2>/dev/null | grep -i -E "^(torch|sglang|flash|nvidia-cutlass|quack|apache-tvm|orjson) "; } > "$out/summary.txt" 2>&1
run 1-check.txt fa-doctor check -v
run 2-check.json fa-doctor check --json
run 3-fa4.txt fa-doctor check -v --attention-backend fa4
run 4-plan.txt fa-doctor fix --plan --attention-backend fa4
run 5-explain.txt fa-doctor explain --python "$(command -v "$py")" "ModuleNotFoundError: No module named 'orjson'"
cat "$out/summary.txt"
