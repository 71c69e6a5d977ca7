"""fp8lab.torch's speed beside torch's own float32, in one script run, same threads (the targets:
a linear layer's forward + backward under deepseek_v3 >= 0.8x torch's nn.Linear, a dim256 training
step of the PyTorch Llama under deepseek_v3 >= 0.7x torch's float32 step):

  linear   torch.nn.Linear(256, 768) forward + backward at 1024 tokens (the dim256 MLP's w1),
           plain against converted (deepseek_v3: its three GEMMs emulated, X kept in FP8)
  step     experiments/torch_llama.py at the dim256 preset, the engine's seeded init, 1024 tokens
           (batch 4 x 256), mean cross-entropy, backward, AdamW: plain float32 against converted
  recorder ten such steps under the recipe without and with fp8lab.torch.Recorder(every=10): its
           overhead (the target: at most 10%, a ratio >= 0.909)

Each case times its two sides alternately for --rounds rounds of --repeats timed calls (after
warm-up); a side's time is the median over all its calls, the ratio torch / fp8lab (above 1:
fp8lab is faster; for recorder: without / with). Prints one JSON object.

  PYTHONPATH=build/cpu/python build/peers-venv/bin/python tests/torch/speed_vs_torch.py --threads 2
"""
import argparse
import contextlib
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time
import warnings

import torch

import fp8lab.torch as ft

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "experiments"))
import torch_llama  # noqa: E402


def linear_case(recipe):
    torch.manual_seed(0)
    plain = torch.nn.Linear(256, 768)
    converted = torch.nn.Linear(256, 768)
    converted.load_state_dict(plain.state_dict())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ft.convert(torch.nn.Sequential(converted), recipe)
    x = torch.randn(1024, 256, requires_grad=True)
    dy = torch.randn(1024, 768)

    def run(layer):
        def call():
            x.grad = None
            layer.zero_grad(set_to_none=True)
            layer(x).backward(dy)
        return call
    return run(plain), run(converted)


def step_case(recipe):
    tokens = torch.randint(0, 512, (4, 257), generator=torch.Generator().manual_seed(1))

    def side(convert):
        model, _ = torch_llama.Llama.from_fp8lab("seeded", "", "dim256", 1)
        if convert:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ft.convert(model, recipe)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def call():
            optimizer.zero_grad(set_to_none=True)
            model.loss(tokens[:, :-1], tokens[:, 1:]).backward()
            optimizer.step()
        return call
    return side(False), side(True)


def recorder_case(recipe):
    """Ten dim256 training steps under the recipe, without and with a Recorder(every=10): one of
    the ten recorded (the file written too). The ratio is the recorder's cost (target >= 1/1.1)."""
    tokens = torch.randint(0, 512, (4, 257), generator=torch.Generator().manual_seed(1))
    folder = tempfile.mkdtemp(prefix="fp8lab_recorder_bench_")

    def side(record):
        model, _ = torch_llama.Llama.from_fp8lab("seeded", "", "dim256", 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ft.convert(model, recipe)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        recorder = ft.Recorder(os.path.join(folder, "bench.h5"), every=10).attach(model) if record else None
        counter = [0]

        def call():
            for _ in range(10):
                context = recorder.step(counter[0]) if recorder else contextlib.nullcontext()
                with context:
                    optimizer.zero_grad(set_to_none=True)
                    model.loss(tokens[:, :-1], tokens[:, 1:]).backward()
                optimizer.step()
                counter[0] += 1
        return call
    return side(False), side(True)


def timed(call, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return times


def compare(case, rounds, repeats, warmup=2, labels=("torch", "fp8lab")):
    torch_side, fp8lab_side = case
    for _ in range(warmup):
        torch_side()
        fp8lab_side()
    a, b = [], []
    for _ in range(rounds):
        a += timed(torch_side, repeats)
        b += timed(fp8lab_side, repeats)
    ta, tb = statistics.median(a), statistics.median(b)
    return {f"{labels[0]}_ms": round(ta * 1e3, 3), f"{labels[1]}_ms": round(tb * 1e3, 3), "ratio": round(ta / tb, 3)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--recipe", default="deepseek_v3")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--cases", default="linear,step")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    ft.set_num_threads(a.threads)
    cases = {"linear": linear_case, "step": step_case, "recorder": recorder_case}
    report = {"threads": a.threads, "recipe": a.recipe, "torch": torch.__version__,
              "targets": {"linear": 0.8, "step": 0.7, "recorder": round(1 / 1.1, 3)}}
    for name in a.cases.split(","):
        labels = ("without_recorder", "with_recorder") if name == "recorder" else ("torch", "fp8lab")
        report[name] = compare(cases[name](a.recipe), a.rounds, a.repeats, labels=labels)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
