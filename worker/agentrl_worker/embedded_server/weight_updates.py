"""The embedded engine's weight endpoints, with SGLang's request and answer shapes (docs/embedded-engine.md).

Every update goes through the scheduler (scheduler.WeightUpdate): it waits for running generations unless generation
is paused, then loads. `/update_weights_from_distributed` receives its bucket inside that load, so the trainer's
broadcast waits as long as SGLang's would behind its writer lock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ..weight_group import DTYPES, join_weight_group, receive_tensors
from .lora import AdapterError
from .model import LoadedModel, copy_weights, load_weights_from_disk
from .sampling import RequestError
from .scheduler import Scheduler, WeightUpdate

# How long joining a group, and each broadcast in it, may take (SGLang's default_pg_timeout is 30 minutes).
GROUP_TIMEOUT_S = 1800.0


@dataclass
class _Group:
    group: dist.ProcessGroup
    # Where a received tensor lands: gloo moves CPU tensors, NCCL GPU tensors.
    device: torch.device


class WeightEndpoints:
    def __init__(self, loaded: LoadedModel, scheduler: Scheduler) -> None:
        self.loaded = loaded
        self.scheduler = scheduler
        self._groups: dict[str, _Group] = {}
        self._lock = threading.Lock()

    def update_weights_from_disk(self, body: object) -> tuple[int, dict]:
        fields = _object(body, "update_weights_from_disk")
        path = fields.get("model_path")
        if not isinstance(path, str):
            raise RequestError("update_weights_from_disk needs {\"model_path\": string}.")
        update = WeightUpdate(lambda: load_weights_from_disk(self.loaded, path), _version(fields), model_path=path)
        return self._run(update, fields)

    def init_weights_update_group(self, body: object) -> tuple[int, dict]:
        fields = _object(body, "init_weights_update_group")
        address, port = fields.get("master_address"), fields.get("master_port")
        offset, world = fields.get("rank_offset"), fields.get("world_size")
        name, backend = fields.get("group_name", "weight_update_group"), fields.get("backend", "nccl")
        if not isinstance(address, str) or not all(_is_int(v) for v in (port, offset, world)) or not isinstance(name, str):
            raise RequestError("init_weights_update_group needs master_address (string), master_port, rank_offset and world_size (integers).")
        if backend == "nccl" and self.loaded.device.type != "cuda":
            return 400, {"success": False, "message": "backend nccl needs the engine on a GPU; this one runs on the CPU: use gloo"}
        with self._lock:
            if name in self._groups:
                return 400, {"success": False, "message": f"group {name!r} already exists"}
        try:
            # This engine is one rank (no tensor parallelism), so its rank is the offset.
            group = join_weight_group(address, port, offset, world, name, backend, GROUP_TIMEOUT_S)
        except Exception as error:  # noqa: BLE001 (the caller gets the reason and falls back to disk)
            return 400, {"success": False, "message": f"Failed to init process group: {error}"}
        with self._lock:
            self._groups[name] = _Group(group, self.loaded.device if backend == "nccl" else torch.device("cpu"))
        return 200, {"success": True, "message": "Succeeded to initialize custom process group."}

    def update_weights_from_distributed(self, body: object) -> tuple[int, dict]:
        fields = _object(body, "update_weights_from_distributed")
        names, dtypes, shapes = fields.get("names"), fields.get("dtypes"), fields.get("shapes")
        if not (isinstance(names, list) and isinstance(dtypes, list) and isinstance(shapes, list)) or not (
            len(names) == len(dtypes) == len(shapes)
        ):
            raise RequestError("update_weights_from_distributed needs names, dtypes and shapes: lists of one length.")
        bad = [d for d in dtypes if d not in DTYPES]
        if bad:
            raise RequestError(f"dtypes must be among {', '.join(DTYPES)}; got {bad[0]!r}")
        name = fields.get("group_name", "weight_update_group")
        with self._lock:
            group = self._groups.get(name)
        if group is None:
            return 400, {"success": False, "message": f"no weight update group {name!r}: call /init_weights_update_group first"}

        def load() -> int:
            tensors = receive_tensors(group.group, names, dtypes, shapes, group.device)
            return copy_weights(self.loaded, tensors, "the weight update group", complete=False)

        return self._run(WeightUpdate(load, _version(fields)), fields)

    def update_weight_version(self, body: object) -> tuple[int, dict]:
        fields = _object(body, "update_weight_version")
        version = fields.get("new_version")
        if not isinstance(version, str):
            raise RequestError("update_weight_version needs {\"new_version\": string}.")
        if fields.get("abort_all_requests", True):  # SGLang's default
            self.scheduler.abort("", abort_all=True)
        self.scheduler.weight_version = version
        return 200, {"success": True, "message": f"Weight version updated to {version}", "new_version": version}

    def load_lora_adapter(self, body: object) -> tuple[int, dict]:
        """SGLang's /load_lora_adapter {lora_name, lora_path}: the adapter is read and checked here, then served from
        the scheduler thread between steps; a name already loaded is refused (unload it first)."""
        fields = _object(body, "load_lora_adapter")
        name, path = fields.get("lora_name"), fields.get("lora_path")
        if not isinstance(name, str) or not name or not isinstance(path, str):
            raise RequestError("load_lora_adapter needs {\"lora_name\": string, \"lora_path\": string}.")
        adapters = self.scheduler.adapters
        if adapters is None:
            return 400, self._lora_answer(False, "LoRA is not enabled: start the server with --enable-lora")
        if name in adapters.adapters:
            return 400, self._lora_answer(False, f"LoRA adapter {name!r} is already loaded; unload it first")
        try:
            adapter = adapters.read(name, path)
        except (AdapterError, OSError, KeyError, ValueError) as error:
            return 400, self._lora_answer(False, f"Failed to load LoRA adapter {name!r}: {error}")
        update = WeightUpdate(lambda: adapters.load(adapter), None, clears_cache=False, source=f"of LoRA adapter {name!r} from {path}")
        self.scheduler.update_weights(update)
        return (200 if update.success else 400), self._lora_answer(update.success, "" if update.success else update.message)

    def unload_lora_adapter(self, body: object) -> tuple[int, dict]:
        fields = _object(body, "unload_lora_adapter")
        name = fields.get("lora_name")
        if not isinstance(name, str):
            raise RequestError("unload_lora_adapter needs {\"lora_name\": string}.")
        adapters = self.scheduler.adapters
        if adapters is None or name not in adapters.adapters:
            return 400, self._lora_answer(False, f"LoRA adapter {name!r} is not loaded")
        # Through the scheduler: it waits for the generations running (unless paused), so none loses its adapter.
        update = WeightUpdate(lambda: adapters.unload(name), None, clears_cache=False, action="unloaded", source=f"of LoRA adapter {name!r}")
        self.scheduler.update_weights(update)
        return (200 if update.success else 400), self._lora_answer(update.success, "" if update.success else update.message)

    def _lora_answer(self, success: bool, message: str) -> dict:
        """SGLang's LoadLoRAAdapterReqOutput: the outcome and every adapter now served, by name."""
        adapters = self.scheduler.adapters
        return {"success": success, "error_message": message, "loaded_adapters": {} if adapters is None else adapters.names()}

    def get_weights_by_name(self, body: object) -> tuple[int, object]:
        fields = _object(body, "get_weights_by_name")
        name, truncate = fields.get("name"), fields.get("truncate_size", 100)
        if not isinstance(name, str) or not _is_int(truncate):
            raise RequestError("get_weights_by_name needs {\"name\": string, \"truncate_size\": integer}.")
        tensor = self.loaded.model.state_dict().get(name)
        if tensor is None:
            raise RequestError(f"no parameter named {name!r}")
        # SGLang's answer: the first truncate_size rows as nested lists (float32 values are exact as JSON doubles).
        return 200, tensor[:truncate].detach().float().cpu().tolist()

    def _run(self, update: WeightUpdate, fields: dict) -> tuple[int, dict]:
        self.scheduler.update_weights(update, abort_all=bool(fields.get("abort_all_requests", False)))
        answer = {"success": update.success, "message": update.message, "num_paused_requests": update.num_paused_requests}
        return (200 if update.success else 400), answer


def _object(body: object, endpoint: str) -> dict:
    if not isinstance(body, dict):
        raise RequestError(f"{endpoint}: the request body must be a JSON object.")
    return body


def _version(fields: dict) -> str | None:
    version = fields.get("weight_version")
    if version is not None and not isinstance(version, str):
        raise RequestError("weight_version must be a string.")
    return version


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
