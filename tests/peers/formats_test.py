"""Formats: fp8lab's E4M3/E5M2/FP16/BF16 encode and decode against the peers' casts, over EVERY
FP32 bit pattern (2^32 inputs, no sampling) and every code.

  encode, nosat      fp8lab encode(x, nosat)     vs  peer cast of x
  encode, satfinite  fp8lab encode(x, satfinite) vs  peer cast of clip(x, -max, max)
                     (the peers do not saturate, so clip first; clip maps every |x| > max to
                     +-max exactly, so peer(clip(x)) is peer(x) there and peer(+-max) elsewhere,
                     which saves a second 2^32 cast)
  decode             fp8lab decode(code) vs the peer's code -> FP32, every code

Peers: torch (float8_e4m3fn, float8_e5m2, float16, bfloat16), ml_dtypes (float8_e4m3fn,
float8_e5m2, bfloat16) and NumPy's own float16. Every difference is put in a class (NaN sign,
NaN payload, overflow, infinity, rounding tie, other) and counted. fp8lab's contract
(kernels/formats/float_formats.hpp: "any NaN input gives the canonical NaN, the sign dropped")
and the peers' casts (which keep a NaN's sign, and some its payload bits) may differ only for
NaN inputs, so the test fails on any difference for a non-NaN input, and on a NaN input where
fp8lab's code is not the canonical NaN or the peer's is no NaN at all.

usage: formats_test.py FORMAT [--build build/cpu] [--results results/peers]
"""
import subprocess
import sys

import ml_dtypes
import numpy as np
import torch

import peers_common

CHUNK = 1 << 22  # inputs per chunk, as format_codes_driver.cpp writes them

# name: (code dtype, max finite, canonical NaN magnitude, infinity code or None, peers)
FORMATS = {
    "e4m3": (np.uint8, 448.0, 0x7F, None, {"torch": torch.float8_e4m3fn, "ml_dtypes": ml_dtypes.float8_e4m3fn}),
    "e5m2": (np.uint8, 57344.0, 0x7F, 0x7C, {"torch": torch.float8_e5m2, "ml_dtypes": ml_dtypes.float8_e5m2}),
    "fp16": (np.uint16, 65504.0, 0x7FFF, 0x7C00, {"torch": torch.float16, "numpy": np.float16}),
    "bf16": (np.uint16, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max), 0x7FFF, 0x7F80,
             {"torch": torch.bfloat16, "ml_dtypes": ml_dtypes.bfloat16}),
}
TORCH_VIEW = {np.uint8: torch.uint8, np.uint16: torch.int16}


class Format:
    def __init__(self, name):
        self.name = name
        self.code_dtype, self.max, self.nan_magnitude, self.inf_code, self.peers = FORMATS[name]
        self.bits = 8 * np.dtype(self.code_dtype).itemsize
        self.sign = 1 << (self.bits - 1)

    def is_nan(self, codes):
        magnitude = codes & (self.sign - 1)
        if self.inf_code is None:
            return magnitude == self.nan_magnitude
        return magnitude > self.inf_code

    def cast(self, peer, x):
        """The peer's code for each float32 in x."""
        dtype = self.peers[peer]
        if isinstance(dtype, torch.dtype):
            return torch.from_numpy(x).to(dtype).view(TORCH_VIEW[self.code_dtype]).numpy().view(self.code_dtype)
        return x.astype(dtype).view(self.code_dtype)

    def decode_peer(self, peer, codes):
        """The peer's float32 bits for each code."""
        dtype = self.peers[peer]
        if isinstance(dtype, torch.dtype):
            t = torch.from_numpy(codes.view(np.int16) if self.bits == 16 else codes)
            return t.view(dtype).float().numpy().view(np.uint32)
        return codes.view(dtype).astype(np.float32).view(np.uint32)


class Differences:
    """Counts and up to three examples per class of difference."""

    def __init__(self):
        self.agree = 0
        self.classes = {}

    def add(self, name, count, example):
        entry = self.classes.setdefault(name, {"count": 0, "examples": []})
        entry["count"] += int(count)
        if len(entry["examples"]) < 3:
            entry["examples"].append(example)

    def as_json(self):
        return {"agree": self.agree, "differ": sum(c["count"] for c in self.classes.values()),
                "classes": dict(sorted(self.classes.items()))}


CLASSES = ["NaN input: fp8lab's code is not the canonical NaN", "NaN input: peer gives a non-NaN code",
           "NaN input: peer keeps the sign and payload bits", "NaN input: peer keeps the sign (negative NaN)",
           "NaN input: peer keeps payload bits", "NaN input: other", "infinite input", "overflow (|x| > max finite)",
           "rounding tie", "other"]
ALLOWED = {2, 3, 4}   # the peers' documented NaN behaviour; fp8lab's contract drops sign and payload


def classify(fmt, decoded, bits, ours, theirs, differences):
    """Puts each mismatch (inputs `bits`, codes `ours` vs `theirs`) in its class (integer ids:
    a chunk of NaN inputs can mismatch whole, 4M elements)."""
    x = bits.view(np.float32)
    magnitude = bits & 0x7FFFFFFF
    nan_in = magnitude > 0x7F800000
    theirs_nan = fmt.is_nan(theirs)
    sign_kept = (theirs & fmt.sign) != 0
    payload_kept = (theirs & (fmt.sign - 1)) != fmt.nan_magnitude
    with np.errstate(invalid="ignore"):
        x64 = x.astype(np.float64)
        tie = np.abs(x64 - decoded[ours].view(np.float32)) == np.abs(x64 - decoded[theirs].view(np.float32))
        overflow = np.abs(x) > fmt.max
    classes = np.select(
        [nan_in & (ours != fmt.nan_magnitude), nan_in & ~theirs_nan, nan_in & sign_kept & payload_kept,
         nan_in & sign_kept, nan_in & payload_kept, nan_in, magnitude == 0x7F800000, overflow, tie],
        np.arange(9), 9)
    hex_width = fmt.bits // 4
    counts = np.bincount(classes, minlength=len(CLASSES))
    for c in np.flatnonzero(counts):
        i = np.argmax(classes == c)
        differences.add(CLASSES[c], counts[c],
                        {"input": f"0x{int(bits[i]):08x}", "fp8lab": f"0x{int(ours[i]):0{hex_width}x}",
                         "peer": f"0x{int(theirs[i]):0{hex_width}x}"})


def read_exactly(stream, buffer):
    view = memoryview(buffer).cast("B")
    got = 0
    while got < len(view):
        n = stream.readinto(view[got:])
        if not n:
            sys.exit(f"FAILED: format_codes_driver ended after {got} of {len(view)} bytes of a chunk")
        got += n


def sweep(fmt, driver):
    decoded = np.frombuffer(subprocess.run([str(driver), "decode", fmt.name], capture_output=True, check=True).stdout,
                            dtype=np.uint32)
    results = {(peer, mode): Differences() for peer in fmt.peers for mode in ("nosat", "satfinite")}
    clip_codes = {peer: fmt.cast(peer, np.array([fmt.max, -fmt.max], dtype=np.float32)) for peer in fmt.peers}
    codes = np.empty(2 * CHUNK, dtype=fmt.code_dtype)
    proc = subprocess.Popen([str(driver), "encode", fmt.name], stdout=subprocess.PIPE)
    for start in range(0, 1 << 32, CHUNK):
        read_exactly(proc.stdout, codes)
        nosat, satfinite = codes[:CHUNK], codes[CHUNK:]
        bits = np.arange(start, start + CHUNK, dtype=np.uint64).astype(np.uint32)
        x = bits.view(np.float32)
        with np.errstate(invalid="ignore"):
            above, below = x > fmt.max, x < -fmt.max
        for peer in fmt.peers:
            theirs = fmt.cast(peer, x)
            theirs_clipped = np.where(above, clip_codes[peer][0], np.where(below, clip_codes[peer][1], theirs))
            for mode, ours, peer_codes in (("nosat", nosat, theirs), ("satfinite", satfinite, theirs_clipped)):
                differ = np.flatnonzero(ours != peer_codes)
                results[(peer, mode)].agree += CHUNK - differ.size
                if differ.size:
                    classify(fmt, decoded, bits[differ], ours[differ], peer_codes[differ], results[(peer, mode)])
    if proc.wait() != 0:
        sys.exit(f"FAILED: format_codes_driver encode {fmt.name} exited {proc.returncode}")
    return decoded, results


def decode_check(fmt, decoded):
    codes = np.arange(1 << fmt.bits, dtype=np.uint32).astype(fmt.code_dtype)
    out = {}
    for peer in fmt.peers:
        theirs = fmt.decode_peer(peer, codes)
        d = Differences()
        differ = np.flatnonzero(theirs != decoded)
        d.agree = codes.size - differ.size
        nan_code = fmt.is_nan(codes[differ])
        both_nan = nan_code & ((theirs[differ] & 0x7FFFFFFF) > 0x7F800000)
        for name, mask in (("NaN code: peer's NaN keeps the code's sign/payload", both_nan),
                           ("other", ~both_nan)):
            if mask.any():
                i = differ[mask][0]
                d.add(name, mask.sum(), {"code": f"0x{int(codes[i]):x}", "fp8lab": f"0x{int(decoded[i]):08x}",
                                         "peer": f"0x{int(theirs[i]):08x}"})
        out[peer] = d.as_json()
    return out


def main():
    parser = peers_common.arguments(__doc__.splitlines()[0])
    parser.add_argument("format", choices=sorted(FORMATS))
    args = parser.parse_args()
    torch.set_num_threads(1)  # ctest runs the formats side by side, one core each
    fmt = Format(args.format)
    driver = args.build / "tests" / "peers" / "fp8lab_peers_format_codes"
    decoded, results = sweep(fmt, driver)
    finding = {"format": fmt.name, "inputs": 1 << 32,
               "encode": {f"{peer} {mode}": d.as_json() for (peer, mode), d in results.items()},
               "decode": decode_check(fmt, decoded)}
    failures = []
    for key, d in finding["encode"].items():
        for name, c in d["classes"].items():
            if CLASSES.index(name) not in ALLOWED:
                failures.append(f"{fmt.name} encode {key}: {c['count']} differences of class '{name}', e.g. {c['examples']}")
    for peer, d in finding["decode"].items():
        if "other" in d["classes"]:
            failures.append(f"{fmt.name} decode {peer}: {d['classes']['other']}")
    peers_common.write_finding(args.results, f"formats_{fmt.name}", finding)
    print({k: (v["agree"], {n: c["count"] for n, c in v["classes"].items()}) for k, v in finding["encode"].items()})
    peers_common.verdict(failures)


if __name__ == "__main__":
    main()
