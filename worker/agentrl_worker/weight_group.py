"""The weight-update process group: the trainer's rank 0 plus every inference server rank, apart from training.

SGLang's `/init_weights_update_group` joins such a group on each server (rank `rank_offset + tp_rank`), and the
trainer joins as rank 0; `/update_weights_from_distributed` then receives tensors that rank 0 broadcasts. Both sides
must build the group the same way, so this is SGLang's recipe (`init_custom_process_group`): the TCPStore of a
`tcp://master_address:master_port` rendezvous (rank 0 hosts it), the store prefixed by the group name, and a process group
registered with torch so `dist.broadcast(..., group=...)` accepts it. It is a group of its own, so it neither needs nor
disturbs the default (training) group: torchrun's ranks keep theirs, and an inference server needs none.

Used by the trainer (weight_sync.py) and by the embedded engine (embedded_server), which are the two ends.
"""

from __future__ import annotations

import datetime
import inspect

import torch
import torch.distributed as dist

# SGLang's spellings (torch attribute names), as /update_weights_from_distributed's `dtypes` carry them.
DTYPES: dict[str, torch.dtype] = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def dtype_from_name(name: str) -> torch.dtype:
    if name not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {name!r}")
    return DTYPES[name]


def join_weight_group(
    master_address: str, master_port: int, rank: int, world_size: int, group_name: str, backend: str, timeout_s: float
) -> dist.ProcessGroup:
    """Joins (rank 0: hosts) the group; returns once every rank has joined, or raises after `timeout_s`."""
    from torch.distributed.distributed_c10d import Backend, PrefixStore, _new_process_group_helper, _world

    if backend not in ("gloo", "nccl"):
        raise ValueError(f"backend must be gloo or nccl, got {backend!r}")
    timeout = datetime.timedelta(seconds=timeout_s)
    # The store SGLang's tcp:// rendezvous makes, built directly: under torchrun, rendezvous() would only connect to
    # the elastic agent's store (TORCHELASTIC_USE_AGENT_STORE) and never host this one.
    store = dist.TCPStore(master_address, master_port, world_size, is_master=rank == 0, timeout=timeout, multi_tenant=True)
    store = PrefixStore(group_name, store)
    # torch renamed pg_options to backend_options (2.6); passing the one this torch has keeps older versions working.
    options = "backend_options" if "backend_options" in inspect.signature(_new_process_group_helper).parameters else "pg_options"
    group, _ = _new_process_group_helper(
        world_size, rank, [], Backend(backend), store, group_name=group_name, timeout=timeout, **{options: None}
    )
    # Group rank i is "global" rank i for this group, so broadcast(src=0, group=group) means the trainer's rank 0.
    _world.pg_group_ranks[group] = {i: i for i in range(world_size)}
    return group


def receive_tensors(
    group: dist.ProcessGroup, names: list[str], dtypes: list[str], shapes: list[list[int]], device: torch.device
) -> dict[str, torch.Tensor]:
    """The receiving end of one bucket: one broadcast from rank 0 per tensor, in the announced order."""
    tensors: dict[str, torch.Tensor] = {}
    for name, dtype, shape in zip(names, dtypes, shapes):
        tensor = torch.empty(shape, dtype=dtype_from_name(dtype), device=device)
        dist.broadcast(tensor, src=0, group=group)
        tensors[name] = tensor
    return tensors
