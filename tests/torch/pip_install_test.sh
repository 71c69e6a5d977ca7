#!/usr/bin/env bash
# `python -m pip install .` from the repository root, as the README gives it, into a folder of its
# own (--target: the peers' venv stays as it is), then, from outside the repository:
#   - `import fp8lab` needs only NumPy (torch made unimportable), and its GEMM runs;
#   - fp8lab.torch imports from the installed copy, finds the packaged recipes, converts a model
#     and runs it forward and backward;
#   - without torch, `import fp8lab.torch` is an ImportError saying what to install.
# The wheel's build folder is build/pip/ (pyproject.toml), reused by the next run.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
unset PYTHONPATH  # the build tree's package must not be the one imported
if ! python -m pip install --disable-pip-version-check --no-input --timeout 30 --retries 1 --no-deps \
      --target "$work/site" "$root" >"$work/pip.log" 2>&1; then
  if grep -qiE "NewConnectionError|Failed to establish|Temporary failure in name resolution|Network is unreachable" "$work/pip.log"; then
    echo "torch: SKIPPED: pip install . needs its build requirements from PyPI, which cannot be reached" >&2
    exit 77
  fi
  tail -n 30 "$work/pip.log" >&2
  echo "FAIL: python -m pip install . failed" >&2
  exit 1
fi
cd "$work"
PYTHONPATH="$work/site" python - "$work/site" <<'PY'
import sys
sys.modules["torch"] = None  # import fp8lab must not need it
import numpy as np
import fp8lab
assert fp8lab.__file__.startswith(sys.argv[1]), fp8lab.__file__
c = fp8lab.gemm(np.ones((4, 128), np.float32), np.ones((8, 128), np.float32))
assert c.shape == (4, 8) and abs(float(c[0, 0]) - 128.0) < 1e-3, c[0, 0]
try:
    import fp8lab.torch  # noqa: F401
    sys.exit("FAIL: fp8lab.torch imported without torch")
except ImportError as e:
    assert "fp8lab.torch needs PyTorch" in str(e), e
PY
PYTHONPATH="$work/site" python - "$work/site" <<'PY'
import sys
import torch
import fp8lab
import fp8lab.torch as ft
assert fp8lab.__file__.startswith(sys.argv[1]), fp8lab.__file__
folder = fp8lab._core._recipe_folder()
assert folder.startswith(sys.argv[1]), f"the installed package reads recipes from {folder}"
names = [n for n, _, _ in fp8lab.recipes()]
assert "mxfp8" in names and "nvfp4" in names and "seed/dp4" in names, names
model = ft.convert(torch.nn.Sequential(torch.nn.Linear(128, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32)), "mxfp8",
                   layer_names={"2": "classifier"})
x = torch.randn(16, 128, requires_grad=True)
model(x).square().sum().backward()
assert x.grad is not None and model[0].weight.grad is not None
assert model[2].gemms()["fprop"] == "bf16"
print("PASS [pip install .]: fp8lab", fp8lab.__version__, "from", sys.argv[1])
PY
