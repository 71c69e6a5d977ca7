"""Formats: fp8lab's E4M3/E5M2/FP16/BF16, E2M1/E3M2/E2M3 and UE8M0 encode and decode against the peers' casts,
over EVERY FP32 bit pattern (2^32 inputs, no sampling) and every code.

  encode, nosat      fp8lab encode(x, nosat)     vs  peer cast of x
  encode, satfinite  fp8lab encode(x, satfinite) vs  peer cast of clip(x, -max, max)
                     (the peers do not saturate, so clip first; clip maps every |x| > max to
                     +-max exactly, so peer(clip(x)) is peer(x) there and peer(+-max) elsewhere,
                     which saves a second 2^32 cast); E2M1/E3M2/E2M3 have satfinite only (fp8lab
                     encode<F>(x)), and their peer saturates by itself: compared with no clip
  ceil               UE8M0: fp8lab ue8m0_encode_ceil(x) (its one encoder: the pow2 scale rule) vs
                     ml_dtypes' float8_e8m0fnu cast of x, which rounds to nearest: every difference
                     must be one of the two explained ones (nearest is one code below; fp8lab
                     saturates where the peer gives NaN), checked input by input
  decode             fp8lab decode(code) vs the peer's code -> FP32, every code

Peers: torch (float8_e4m3fn, float8_e5m2, float16, bfloat16), ml_dtypes (float8_e4m3fn,
float8_e5m2, bfloat16, float4_e2m1fn, float6_e3m2fn, float6_e2m3fn, float8_e8m0fnu) and, for decode only, NumPy's own float16 (see FORMATS for why). Every difference is put in a class (NaN sign,
NaN payload, overflow, infinity, rounding tie, other) and counted. fp8lab's contract
(kernels/formats/float_formats.hpp: "any NaN input gives the canonical NaN, the sign dropped")
and the peers' casts (which keep a NaN's sign, and some its payload bits) may differ only for
NaN inputs, so the test fails on any difference for a non-NaN input, and on a NaN input where
fp8lab's code is not the canonical NaN or the peer's is no NaN at all. E2M1/E3M2/E2M3 have no NaN:
fp8lab's contract gives -0 (the sign bit alone) for any NaN, ml_dtypes -0 for a positive NaN and
+0 for a negative one; that is the one difference allowed there.

How it stays fast (2 cores, a few minutes for 4 x 2^32 inputs): the patterns are made once per
chunk of 2^22 and go through all four formats and all eight peer casts while they are in memory;
fp8lab's codes come from format_codes_library.cpp called in-process (ctypes, into this
process's buffers); equal chunks are recognised by comparing 8 codes at a time (uint64 views);
the NaN chunks, where whole chunks differ, are classed through a table indexed by the peer's
code; the chunks are shared between --jobs processes (default 2, one per ctest processor).

usage: formats_test.py [FORMAT...] [--jobs N] [--build build/cpu] [--results build/cpu/peers-findings]
"""
import concurrent.futures
import ctypes
import multiprocessing
import sys

import ml_dtypes
import numpy as np
import torch

import peers_common

CHUNK = 1 << 22       # inputs per chunk: 1024 chunks
TASK_CHUNKS = 16      # chunks per task handed to a worker (64 tasks: the NaN and overflow chunks spread out)

# name: (code dtype, max finite, canonical NaN magnitude, infinity code or None, encode peers,
#        decode peers)
# NumPy's float16 is a decode peer only: its float32 -> float16 cast takes ~115 ns per input
# whenever the result underflows or overflows (80% of the FP32 patterns; measured 320 s of one
# core for the 2^32 sweep, against 1.3 s for torch's), which alone would break the label's
# time budget, and torch.float16 checks the same cast over every pattern.
FORMATS = {
    "e4m3": (np.uint8, 448.0, 0x7F, None, {"torch": torch.float8_e4m3fn, "ml_dtypes": ml_dtypes.float8_e4m3fn}, {}),
    "e5m2": (np.uint8, 57344.0, 0x7F, 0x7C, {"torch": torch.float8_e5m2, "ml_dtypes": ml_dtypes.float8_e5m2}, {}),
    "fp16": (np.uint16, 65504.0, 0x7FFF, 0x7C00, {"torch": torch.float16}, {"numpy": np.float16}),
    "bf16": (np.uint16, float(ml_dtypes.finfo(ml_dtypes.bfloat16).max), 0x7FFF, 0x7F80,
             {"torch": torch.bfloat16, "ml_dtypes": ml_dtypes.bfloat16}, {}),
    # no NaN: the third field is the code a NaN input gives (-0); one code per uint8, low bits
    "e2m1": (np.uint8, 6.0, 0x8, None, {"ml_dtypes": ml_dtypes.float4_e2m1fn}, {}),
    "e3m2": (np.uint8, 28.0, 0x20, None, {"ml_dtypes": ml_dtypes.float6_e3m2fn}, {}),
    "e2m3": (np.uint8, 7.5, 0x20, None, {"ml_dtypes": ml_dtypes.float6_e2m3fn}, {}),
    "ue8m0": (np.uint8, 2.0 ** 127, 0xFF, None, {"ml_dtypes": ml_dtypes.float8_e8m0fnu}, {}),
}
# name: (bits of a code, fp8lab's encode modes) where not (the code dtype's width, nosat and satfinite)
LAYOUT = {"e2m1": (4, ("satfinite",)), "e3m2": (6, ("satfinite",)), "e2m3": (6, ("satfinite",)),
          "ue8m0": (8, ("ceil",))}
NO_NAN = {"e2m1", "e3m2", "e2m3"}
TORCH_VIEW = {np.uint8: torch.uint8, np.uint16: torch.int16}

CLASSES = ["NaN input: fp8lab's code is not the canonical NaN (-0 in a format without NaN)", "NaN input: peer gives a non-NaN code",
           "NaN input: peer keeps the sign and payload bits", "NaN input: peer keeps the sign (negative NaN)",
           "NaN input: peer keeps payload bits", "NaN input: other", "infinite input", "overflow (|x| > max finite)",
           "rounding tie", "other",
           "NaN input (format without NaN): peer gives +0 where fp8lab gives -0",
           "ue8m0: peer rounds to nearest, one code below fp8lab's round-up (the pow2 scale rule)",
           "ue8m0: +inf or at least 1.5 * 2^127: fp8lab saturates to 0xFE (as cvt.rp.satfinite), peer gives NaN"]
# The peers' documented NaN behaviour (fp8lab's contract drops sign and payload), and the
# explained UE8M0 differences.
ALLOWED = {2, 3, 4, 10, 11, 12}
# How many inputs each explained UE8M0 class must hold, so that an fp8lab encoder that rounded to
# nearest as the peer does (no differences at all) fails too. Nearest and round-up part for a normal
# positive x = 2^e * (1 + f), 0 < f < 0.5 (2^22 - 1 mantissas per binade), in the 253 binades
# e = -126 ... 126 (at e = 127 both give 0xFE: fp8lab saturates, the peer rounds down); FP32
# subnormals agree (the peer rounds those in (2^-127, 2^-126) up too). The peer's NaN: +inf and
# x >= 1.5 * 2^127, the patterns 0x7F400000 ... 0x7F800000.
UE8M0_COUNTS = {11: 253 * ((1 << 22) - 1), 12: (1 << 22) + 1}


class Format:
    def __init__(self, name):
        self.name = name
        self.code_dtype, self.max, self.nan_magnitude, self.inf_code, self.peers, extra_decode = FORMATS[name]
        self.decode_peers = {**self.peers, **extra_decode}
        self.bits, self.modes = LAYOUT.get(name, (8 * np.dtype(self.code_dtype).itemsize, ("nosat", "satfinite")))
        # the peers of the IEEE-style formats do not saturate: clip before the satfinite comparison
        self.clip = name not in LAYOUT
        self.sign = 1 << (self.bits - 1)
        # |x| > max is, among FP32 patterns, two contiguous ranges (each ends at the infinity),
        # so within a chunk it is one slice: [lo, hi) of patterns per sign
        max_bits = int(np.array(self.max, dtype=np.float32).view(np.uint32))
        self.overflow_ranges = [(max_bits + 1, 0x7F800001, 0), (0x80000000 + max_bits + 1, 0xFF800001, 1)]

    def is_nan(self, codes):
        if self.name == "ue8m0":
            return codes == 0xFF
        if self.name in NO_NAN:
            return np.zeros(codes.shape, dtype=bool)
        magnitude = codes & (self.sign - 1)
        if self.inf_code is None:
            return magnitude == self.nan_magnitude
        return magnitude > self.inf_code

    def nan_input_class_table(self):
        """For a NaN input where fp8lab gave the canonical NaN: the class of each peer code."""
        codes = np.arange(1 << self.bits, dtype=np.uint32).astype(self.code_dtype)
        if self.name in NO_NAN:
            return np.where(codes == 0, 10, 5)
        sign_kept = (codes & self.sign) != 0
        payload_kept = (codes & (self.sign - 1)) != self.nan_magnitude
        return np.select([~self.is_nan(codes), sign_kept & payload_kept, sign_kept, payload_kept], [1, 2, 3, 4], 5)

    def decode_peer(self, peer, codes):
        """The peer's float32 bits for each code."""
        dtype = self.decode_peers[peer]
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


def library(build):
    lib = ctypes.CDLL(str(build / "tests" / "peers" / "libfp8lab_peers_format_codes.so"))
    lib.fp8lab_peers_encode.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p]
    lib.fp8lab_peers_decode.argtypes = [ctypes.c_char_p, ctypes.c_void_p]
    return lib


def fp8lab_decoded(lib, fmt):
    out = np.empty(1 << fmt.bits, dtype=np.uint32)
    if lib.fp8lab_peers_decode(fmt.name.encode(), out.ctypes.data) != 0:
        sys.exit(f"FAILED: fp8lab_peers_decode({fmt.name}) refused")
    return out


def classify(fmt, decoded, nan_table, bits, ours, theirs):
    """Puts each mismatch (inputs `bits`, codes `ours` vs `theirs`) in its class; returns
    [(class index, count, example)]. NaN inputs (a whole chunk can differ, 4M elements) go
    through the table of the peer's code; the rest (none, when the test passes) one by one."""
    classes = np.empty(bits.size, dtype=np.int64)
    nan_in = (bits & 0x7FFFFFFF) > 0x7F800000
    classes[nan_in] = np.where(ours[nan_in] != fmt.nan_magnitude, 0, nan_table[theirs[nan_in]])
    rest = ~nan_in
    if rest.any() and fmt.name == "ue8m0":
        classes[rest] = classify_ue8m0(bits[rest], ours[rest], theirs[rest])
    elif rest.any():
        b, o, t = bits[rest], ours[rest], theirs[rest]
        x = b.view(np.float32)
        with np.errstate(invalid="ignore"):
            x64 = x.astype(np.float64)
            tie = np.abs(x64 - decoded[o].view(np.float32)) == np.abs(x64 - decoded[t].view(np.float32))
            overflow = np.abs(x) > fmt.max
        classes[rest] = np.select([(b & 0x7FFFFFFF) == 0x7F800000, overflow, tie], [6, 7, 8], 9)
    hex_width = fmt.bits // 4
    counts = np.bincount(classes, minlength=len(CLASSES))
    out = []
    for c in np.flatnonzero(counts):
        i = int(np.argmax(classes == c))
        out.append((int(c), int(counts[c]), {"input": f"0x{int(bits[i]):08x}", "fp8lab": f"0x{int(ours[i]):0{hex_width}x}",
                                             "peer": f"0x{int(theirs[i]):0{hex_width}x}"}))
    return out


def classify_ue8m0(bits, ours, theirs):
    """UE8M0, non-NaN inputs: fp8lab's ceil code vs the peer's nearest code. 11 where the peer is one
    code below and x < 1.5 * 2^(peer - 127) (nearer the lower power of two), 12 where fp8lab saturates
    an input the peer's rounding takes past 2^127, 9 for anything else."""
    x = bits.view(np.float32).astype(np.float64)
    o, t = ours.astype(np.int64), theirs.astype(np.int64)
    positive = (bits > 0) & (bits < 0x80000000)
    nearest_below = positive & (t == o - 1) & (np.exp2(t - 127.0) < x) & (x < 1.5 * np.exp2(t - 127.0))
    saturated = positive & (o == 0xFE) & (t == 0xFF) & (x >= 1.5 * 2.0 ** 127)
    return np.select([nearest_below, saturated], [11, 12], 9)


def same(a, b):
    """a == b everywhere, 8 codes per comparison."""
    return np.array_equal(a.view(np.uint64), b.view(np.uint64))


class Worker:
    """One process's share of the sweep: buffers made once, reused for every chunk."""

    def __init__(self, build, names):
        torch.set_num_threads(1)  # --jobs processes, one core each
        self.lib = library(build)
        self.formats = [Format(n) for n in names]
        self.base = np.arange(CHUNK, dtype=np.uint32)
        self.bits = np.empty(CHUNK, dtype=np.uint32)
        self.x = self.bits.view(np.float32)
        self.x_torch = torch.from_numpy(self.x)
        self.buffers = {}
        for fmt in self.formats:
            ours = {mode: np.empty(CHUNK, fmt.code_dtype) for mode in fmt.modes}
            casts = {}
            for peer, dtype in fmt.peers.items():
                if isinstance(dtype, torch.dtype):
                    out = torch.empty(CHUNK, dtype=dtype)
                    casts[peer] = (out, out.view(TORCH_VIEW[fmt.code_dtype]).numpy().view(fmt.code_dtype))
                else:
                    out = np.empty(CHUNK, dtype=dtype)
                    casts[peer] = (out, out.view(fmt.code_dtype))
            clip = {peer: self.cast_small(fmt, peer, [fmt.max, -fmt.max]) for peer in fmt.peers} if fmt.clip else {}
            self.buffers[fmt.name] = (ours, casts, clip, fp8lab_decoded(self.lib, fmt), fmt.nan_input_class_table())

    @staticmethod
    def cast_small(fmt, peer, values):
        x = np.array(values, dtype=np.float32)
        dtype = fmt.peers[peer]
        if isinstance(dtype, torch.dtype):
            return torch.from_numpy(x).to(dtype).view(TORCH_VIEW[fmt.code_dtype]).numpy().view(fmt.code_dtype)
        return x.astype(dtype).view(fmt.code_dtype)

    def cast(self, fmt, peer, out):
        """The peer's cast of this chunk into its buffer (torch: copy_ is the cast .to() runs)."""
        if isinstance(out, torch.Tensor):
            out.copy_(self.x_torch)
        else:
            with np.errstate(invalid="ignore", over="ignore"):
                np.copyto(out, self.x, casting="unsafe")

    def chunk(self, start):
        """Returns [(format, peer, mode, agree, [(class, count, example)])] for one chunk."""
        np.add(self.base, np.uint32(start), out=self.bits)
        results = []
        for fmt in self.formats:
            ours_by_mode, casts, clip, decoded, nan_table = self.buffers[fmt.name]
            for mode, buffer in ours_by_mode.items():
                if self.lib.fp8lab_peers_encode(fmt.name.encode(), mode.encode(), start, CHUNK, buffer.ctypes.data) != 0:
                    sys.exit(f"FAILED: fp8lab_peers_encode({fmt.name}, {mode}, {start}) refused")
            slices = [(max(lo, start) - start, min(hi, start + CHUNK) - start, which)
                      for lo, hi, which in fmt.overflow_ranges if lo < start + CHUNK and hi > start] if fmt.clip else []
            for peer, (out, theirs) in casts.items():
                self.cast(fmt, peer, out)
                clipped = theirs
                if slices:
                    clipped = theirs.copy()
                    for lo, hi, which in slices:
                        clipped[lo:hi] = clip[peer][which]
                for mode, ours in ours_by_mode.items():
                    peer_codes = clipped if mode == "satfinite" else theirs
                    if same(ours, peer_codes):
                        results.append((fmt.name, peer, mode, CHUNK, []))
                        continue
                    differ = np.flatnonzero(ours != peer_codes)
                    results.append((fmt.name, peer, mode, CHUNK - differ.size,
                                    classify(fmt, decoded, nan_table, self.bits[differ], ours[differ], peer_codes[differ])))
        return results


_worker = None


def _start_worker(build, names):
    global _worker
    _worker = Worker(build, names)


def _run_task(starts):
    return [(start, _worker.chunk(start)) for start in starts]


def sweep(build, names, jobs):
    """{(format, peer, mode): Differences} over all 2^32 inputs, examples in input order."""
    starts = list(range(0, 1 << 32, CHUNK))
    tasks = [starts[i:i + TASK_CHUNKS] for i in range(0, len(starts), TASK_CHUNKS)]
    context = multiprocessing.get_context("spawn")  # torch and fork do not mix
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context, initializer=_start_worker,
                                                initargs=(build, names)) as pool:
        done = [chunk for task in pool.map(_run_task, tasks) for chunk in task]
    results = {}
    for _, records in sorted(done, key=lambda r: r[0]):
        for name, peer, mode, agree, classes in records:
            d = results.setdefault((name, peer, mode), Differences())
            d.agree += agree
            for c, count, example in classes:
                d.add(CLASSES[c], count, example)
    return results


def decode_check(fmt, decoded):
    codes = np.arange(1 << fmt.bits, dtype=np.uint32).astype(fmt.code_dtype)
    out = {}
    for peer in fmt.decode_peers:
        theirs = fmt.decode_peer(peer, codes)
        d = Differences()
        differ = np.flatnonzero(theirs != decoded)
        d.agree = codes.size - differ.size
        nan_code = fmt.is_nan(codes[differ])
        both_nan = nan_code & ((theirs[differ] & 0x7FFFFFFF) > 0x7F800000)
        for name, mask in (("NaN code: both NaN, other NaN bits (the peer keeps the code's sign/payload or gives its default NaN)", both_nan),
                           ("other", ~both_nan)):
            if mask.any():
                i = differ[mask][0]
                d.add(name, mask.sum(), {"code": f"0x{int(codes[i]):x}", "fp8lab": f"0x{int(decoded[i]):08x}",
                                         "peer": f"0x{int(theirs[i]):08x}"})
        out[peer] = d.as_json()
    return out


def main():
    parser = peers_common.arguments(__doc__.splitlines()[0])
    parser.add_argument("formats", nargs="*", help=f"formats to sweep, of {sorted(FORMATS)} (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes (default 2)")
    args = parser.parse_args()
    names = list(dict.fromkeys(args.formats)) or list(FORMATS)
    if unknown := [n for n in names if n not in FORMATS]:
        parser.error(f"unknown format {unknown[0]!r} (expected one of {sorted(FORMATS)})")
    results = sweep(args.build, names, args.jobs)
    lib = library(args.build)
    failures = []
    for name in names:
        fmt = Format(name)
        finding = {"format": fmt.name, "inputs": 1 << 32,
                   "encode": {f"{peer} {mode}": results[(name, peer, mode)].as_json()
                              for peer in fmt.peers for mode in fmt.modes},
                   "decode": decode_check(fmt, fp8lab_decoded(lib, fmt))}
        for key, d in finding["encode"].items():
            if d["agree"] + d["differ"] != 1 << 32:
                failures.append(f"{fmt.name} encode {key}: {d['agree'] + d['differ']} inputs counted, not 2^32")
            for cname, c in d["classes"].items():
                if CLASSES.index(cname) not in ALLOWED:
                    failures.append(f"{fmt.name} encode {key}: {c['count']} differences of class '{cname}', e.g. {c['examples']}")
        if name == "ue8m0":
            counted = finding["encode"]["ml_dtypes ceil"]["classes"]
            for c, expected in UE8M0_COUNTS.items():
                got = counted.get(CLASSES[c], {"count": 0})["count"]
                if got != expected:
                    failures.append(f"ue8m0 encode: {got} inputs of class '{CLASSES[c]}', expected {expected}")
        for peer, d in finding["decode"].items():
            if "other" in d["classes"]:
                failures.append(f"{fmt.name} decode {peer}: {d['classes']['other']}")
        peers_common.write_finding(args.results, f"formats_{fmt.name}", finding)
        print(fmt.name, {k: (v["agree"], {n: c["count"] for n, c in v["classes"].items()}) for k, v in finding["encode"].items()})
    peers_common.verdict(failures)


if __name__ == "__main__":
    main()
