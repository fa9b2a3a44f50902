"""Data-parallel training with ``torchrun`` on PyTorch's DistributedDataParallel (gloo on CPU, NCCL on GPU).

``torchrun --nproc_per_node N tiedlm train PRESET …`` starts N processes; each one reads the environment
torchrun sets (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``MASTER_ADDR``/``PORT``) here. The training data is
batchified into ``train.batch_size`` streams as in a single process, and rank r takes streams
[r·B/N, (r+1)·B/N): the N ranks together see exactly the single process's global batch. DDP broadcasts
rank 0's initial weights and averages the gradients in backward, so every rank takes the same step, and
the per-rank mean losses average to the global-batch mean: the run follows the single-process run with
the same global batch (up to the summation order of the all-reduce, and with different dropout masks,
which each rank draws from its own generator). Validation runs on every rank (the weights are identical,
so the decisions of NT-ASGD agree); only rank 0 logs and writes files.

Checkpoints: at every epoch end rank 0 writes ``last`` with the RNG states of all ranks (gathered), so a
resumed distributed run continues exactly from the last completed epoch. An interruption inside an epoch
keeps the previous epoch-end checkpoint (ranks stop at different windows, so there is no consistent
mid-epoch state to save).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ..errors import UsageError


@dataclass
class DistributedContext:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    comm_device: str = "cpu"  # where collective tensors live: cpu for gloo, this rank's GPU for NCCL

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @classmethod
    def from_environment(cls, device_type: str) -> "DistributedContext":
        """The torchrun environment (a single process when WORLD_SIZE is absent or 1)."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return cls()
        local = int(os.environ.get("LOCAL_RANK", "0"))
        ctx = cls(int(os.environ["RANK"]), world, local, f"cuda:{local}" if device_type == "cuda" else "cpu")
        if not dist.is_initialized():
            dist.init_process_group("nccl" if device_type == "cuda" else "gloo")
        return ctx

    def device(self, device: torch.device) -> torch.device:
        """One GPU per process (cuda:LOCAL_RANK); CPU unchanged."""
        return torch.device("cuda", self.local_rank) if device.type == "cuda" and self.enabled else device

    def shard(self, streams: torch.Tensor) -> torch.Tensor:
        """This rank's columns of the (T, B) stream matrix."""
        if not self.enabled:
            return streams
        batch = streams.size(1)
        if batch % self.world_size:
            raise UsageError(
                f"train.batch_size = {batch} does not split evenly over {self.world_size} processes; "
                f"use a multiple of {self.world_size}"
            )
        per = batch // self.world_size
        return streams[:, self.rank * per : (self.rank + 1) * per].contiguous()

    def gather_rng(self) -> list[torch.Tensor]:
        """Every rank's CPU generator state (rank order), on every rank."""
        state = torch.get_rng_state()
        if not self.enabled:
            return [state]
        out = [torch.empty_like(state, device=self.comm_device) for _ in range(self.world_size)]
        dist.all_gather(out, state.to(self.comm_device))
        return [o.cpu() for o in out]

    def all_true(self, flag: bool) -> bool:
        """True when ``flag`` holds on every rank."""
        if not self.enabled:
            return flag
        t = torch.tensor([1 if flag else 0], device=self.comm_device)
        dist.all_reduce(t, op=dist.ReduceOp.MIN)
        return bool(t.item())

    def barrier(self) -> None:
        if self.enabled:
            dist.barrier()

    def max_parameter_spread(self, model: torch.nn.Module) -> float:
        """Largest |p_rank − p_rank0| over all parameters and ranks (0.0 when the replicas agree)."""
        if not self.enabled:
            return 0.0
        spread = torch.zeros((), device=self.comm_device)
        for p in model.parameters():
            ref = p.detach().clone()
            dist.broadcast(ref, 0)
            spread = torch.maximum(spread, (p.detach() - ref).abs().max())
        dist.all_reduce(spread, op=dist.ReduceOp.MAX)
        return float(spread)

    def shutdown(self) -> None:
        if self.enabled and dist.is_initialized():
            import gc

            gc.collect()  # DDP's reducer must go before its process group
            dist.barrier()  # no rank tears gloo down while another still talks to it
            dist.destroy_process_group()
