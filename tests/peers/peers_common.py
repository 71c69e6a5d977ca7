"""What every peers test shares: where things are, the peers' versions, and how a finding is
written (one JSON per test into the --results folder, whose README.md write_findings.py regenerates
from all of them after each test). ctest runs them with --results BUILD/peers-findings
(run_peer.sh); tests/peers/update_findings.sh writes the committed copies in results/peers/."""
import argparse
import importlib.metadata
import json
import os
import pathlib
import platform
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "build" / "cpu" / "peers-findings"
PEERS = ["torch", "ml_dtypes", "torchao", "mmasim", "safetensors", "numpy"]


def arguments(description):
    """--build DIR (the cpu preset's build folder) and --results DIR, the same for every test."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--build", type=pathlib.Path, default=ROOT / "build" / "cpu")
    parser.add_argument("--results", type=pathlib.Path, default=RESULTS)
    return parser


def versions():
    found = {name: importlib.metadata.version(name) for name in PEERS}
    found["python"] = platform.python_version()
    return found


def fp8lab_cli(build):
    return build / "harness" / "fp8lab"


def run(command, **kwargs):
    """Runs a command, failing the test with its stderr when it fails."""
    done = subprocess.run([str(c) for c in command], capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        sys.exit(f"FAILED: {' '.join(map(str, command))} exited {done.returncode}:\n{done.stderr}")
    return done.stdout


def write_finding(results, name, finding):
    """RESULTS/NAME.json (atomically: ctest -j runs peers tests side by side), then the README."""
    results.mkdir(parents=True, exist_ok=True)
    finding = {"test": name, "versions": versions(), **finding}
    path = results / f"{name}.json"
    tmp = path.with_suffix(f".json.tmp{os.getpid()}")
    tmp.write_text(json.dumps(finding, indent=1, sort_keys=False) + "\n")
    tmp.replace(path)
    subprocess.run([sys.executable, str(pathlib.Path(__file__).with_name("write_findings.py")), str(results)],
                   check=True)


def verdict(failures):
    """Prints the failures and exits 1, or says so and exits 0."""
    for line in failures:
        print("FAIL:", line)
    if failures:
        sys.exit(1)
    print("all checks passed")
