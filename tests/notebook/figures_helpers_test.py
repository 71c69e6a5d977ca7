"""notebooks/fp8lab_figures.py helpers that captions depend on (label notebook).

Usage: figures_helpers_test.py SOURCE_DIR"""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(sys.argv[1]) / "notebooks"))
import fp8lab_figures as ff  # noqa: E402

cases = {
    # file paths shrink to their file names, absolute or relative ...
    "checkpoint /work/shared/data/stories260K/stories260K.bin (sha256 b0a507e7ad0f626624f1)":
        "checkpoint stories260K.bin (sha256 b0a507e7ad0f...)",
    "recipe recipes/deepseek_v3.toml, tensors ./dumps/x.npy": "recipe deepseek_v3.toml, tensors x.npy",
    # ... and nothing else with a slash does
    "gaussian seeds 2/3, E4M3/E5M2, tokens/s, W gaussian / sqrt(in)": "gaussian seeds 2/3, E4M3/E5M2, tokens/s, W gaussian / sqrt(in)",
}
failures = [f"{text!r} -> {ff._shorten(text)!r}, want {want!r}" for text, want in cases.items() if ff._shorten(text) != want]
if failures:
    sys.exit("FAIL: " + "; ".join(failures))
print(f"PASS [figures helpers] ({len(cases)} captions)")
