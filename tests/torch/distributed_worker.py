"""One rank of a distributed training run of the converted PyTorch Llama (torchrun, gloo, CPU):
  torchrun --standalone --nproc_per_node=2 distributed_worker.py --mode ddp|fsdp2 --recipe R --out FILE
Each rank trains on its half of every global batch (rank r takes sequences r*B/2 .. (r+1)*B/2 - 1 of
the batch that torch_llama_train.Data gives the single process); DDP averages the gradients with an
all-reduce, FSDP2 (fully_shard) shards the parameters and reduce-scatters them. Rank 0 writes the
global losses (the mean of the ranks' losses) and the full final parameters to FILE (torch.save)."""
import argparse
import os
import pathlib
import sys
import warnings

import torch
import torch.distributed as dist

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments"))
import fp8lab.torch as ft  # noqa: E402
import torch_llama  # noqa: E402
import torch_llama_train  # noqa: E402

FLAGS = ["--init", "stories260K", "--tokens", "sampled", "--batch", "4", "--seq-len", "32", "--steps", "3", "--lr", "1e-3",
         "--sample-tokens", "4096", "-o", "unused.h5"]


def build(recipe):
    model, _ = torch_llama.Llama.from_fp8lab("checkpoint", "stories260K")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ft.convert(model, recipe)
    return model


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mode", choices=["ddp", "fsdp2"], required=True)
    p.add_argument("--recipe", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    torch.set_num_threads(1)
    ft.set_num_threads(1)
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model = build(a.recipe)
    if a.mode == "ddp":
        trained = torch.nn.parallel.DistributedDataParallel(model)
    else:
        from torch.distributed.fsdp import fully_shard
        trained = fully_shard(model)
    args = torch_llama_train.arguments(FLAGS)
    data = torch_llama_train.Data(args, 512)
    optimizer = torch.optim.AdamW(trained.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    losses = []
    share = args.batch // world
    for step in range(args.steps):
        tokens = data.batch(step, 1)[rank * share:(rank + 1) * share]
        optimizer.zero_grad(set_to_none=True)
        logits = trained(tokens[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
        loss.backward()
        optimizer.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        losses.append(total / world)
    state = {}
    for name, value in model.state_dict().items():
        state[name] = value.full_tensor() if hasattr(value, "full_tensor") else value
    if rank == 0:
        torch.save({"losses": torch.stack(losses), "state": state}, a.out)
    # Both ranks leave together, and without tearing gloo down: destroy_process_group (and the
    # interpreter's own teardown of the group) still aborted a rank now and then after the
    # barrier ("terminate called without an active exception" from a gloo pair closed under
    # it). Everything this worker owes is written (rank 0's file is closed), so it exits at once.
    dist.barrier()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
