"""Just enough of verl's tool classes for a verl tool to run in agentrl's tool host without verl installed:
BaseTool (verl/tools/base_tool.py), ToolResponse and the OpenAI function schemas (verl/tools/schemas.py), and the
GSM8K scorer (verl/utils/reward_score/gsm8k.py) that verl's own Gsm8kTool imports.

`install_verl_aliases()` registers this module under `verl.tools.base_tool`, `verl.tools.schemas` and
`verl.utils.reward_score.gsm8k` when `verl` itself cannot be imported, so a tool file with verl's imports
(`from verl.tools.base_tool import BaseTool`) runs unchanged. With verl installed, verl's own classes are used.
The schema classes are plain attribute holders (verl uses pydantic): `schema.function.name`, `model_dump()`.
"""

from __future__ import annotations

import re
import sys
import types
from typing import Any, Optional
from uuid import uuid4


class _Model:
    """A small stand-in for a pydantic model: keyword construction, attribute access, model_dump()."""

    def __init__(self, **fields: Any) -> None:
        for key, value in fields.items():
            setattr(self, key, value)

    def model_dump(self, exclude_unset: bool = False, exclude_none: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in vars(self).items():
            if exclude_none and value is None:
                continue
            out[key] = value.model_dump(exclude_unset, exclude_none) if isinstance(value, _Model) else value
        return out


class OpenAIFunctionSchema(_Model):
    name: str
    description: str
    parameters: dict[str, Any]


class OpenAIFunctionToolSchema(_Model):
    type: str
    function: OpenAIFunctionSchema

    @classmethod
    def model_validate(cls, data: dict[str, Any]) -> "OpenAIFunctionToolSchema":
        function = dict(data.get("function") or {})
        function.setdefault("parameters", {"type": "object", "properties": {}, "required": []})
        function.setdefault("strict", False)
        return cls(type=data.get("type", "function"), function=OpenAIFunctionSchema(**function))


class ToolResponse(_Model):
    """verl's ToolResponse: optional text, image and video (the two media fields must be lists)."""

    def __init__(self, text: Optional[str] = None, image: Optional[list[Any]] = None, video: Optional[list[Any]] = None) -> None:
        for name, value in (("image", image), ("video", video)):
            if value is not None and not isinstance(value, list):
                raise ValueError(f"ToolResponse.{name} must be a list, got {type(value).__name__}")
        super().__init__(text=text, image=image, video=video)

    def is_empty(self) -> bool:
        return not self.text and not self.image and not self.video


class BaseTool:
    """verl's BaseTool: async create / execute / calc_reward / release with verl's defaults."""

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema) -> None:
        self.config = config
        self.tool_schema = tool_schema
        self.name = tool_schema.function.name

    def get_openai_tool_schema(self) -> OpenAIFunctionToolSchema:
        return self.tool_schema

    async def create(self, instance_id: Optional[str] = None, **kwargs: Any) -> tuple[str, ToolResponse]:
        return (instance_id if instance_id is not None else str(uuid4())), ToolResponse()

    async def execute(self, instance_id: str, parameters: dict[str, Any], **kwargs: Any) -> tuple[ToolResponse, float, dict]:
        return ToolResponse(text="Updated the tool state."), 0.0, {}

    async def calc_reward(self, instance_id: str, **kwargs: Any) -> float:
        return 0.0

    async def release(self, instance_id: str, **kwargs: Any) -> None:
        return None


def _last_number(solution_str: str, method: str) -> Optional[str]:
    tail = solution_str[-300:]
    if method == "strict":
        found = re.findall(r"#### (\-?[0-9\.\,]+)", tail)
        return found[-1].replace(",", "").replace("$", "") if found else None
    found = re.findall(r"(\-?[0-9\.\,]+)", tail)
    if not found:
        return None
    for answer in reversed(found):
        if answer not in ("", "."):
            break
    return answer


def compute_score(solution_str: str, ground_truth: str, method: str = "strict", format_score: float = 0.0, score: float = 1.0) -> float:
    """verl's GSM8K scorer: `score` when the extracted answer equals the ground truth, else `format_score`; 0 when
    nothing is extracted."""
    answer = _last_number(solution_str, method)
    if answer is None:
        return 0
    return score if answer == ground_truth else format_score


STUB_NOTE = "verl is not installed; agentrl provides only verl.tools.base_tool, verl.tools.schemas and verl.utils.reward_score.gsm8k"

_ALIASES = {
    "verl.tools.base_tool": ("BaseTool", "ToolResponse", "OpenAIFunctionToolSchema"),
    "verl.tools.schemas": ("ToolResponse", "OpenAIFunctionToolSchema", "OpenAIFunctionSchema"),
    "verl.utils.reward_score.gsm8k": ("compute_score",),
}


def install_verl_aliases() -> bool:
    """Makes `verl.tools.base_tool`, `verl.tools.schemas` and `verl.utils.reward_score.gsm8k` importable from this
    module when verl is not installed. Returns True when the aliases were installed."""
    try:
        import verl  # noqa: F401
        return False
    except ImportError:
        pass
    this = sys.modules[__name__]
    for dotted, names in _ALIASES.items():
        parts = dotted.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            if name not in sys.modules:
                module = types.ModuleType(name)
                module.__path__ = []  # a package, so submodules resolve through sys.modules
                module.__agentrl_stub__ = True  # type: ignore[attr-defined]
                sys.modules[name] = module
                if i > 1:
                    setattr(sys.modules[".".join(parts[: i - 1])], parts[i - 1], module)
        target = sys.modules[dotted]
        for attr in names:
            setattr(target, attr, getattr(this, attr))
    sys.modules["verl.utils.reward_score"].gsm8k = sys.modules["verl.utils.reward_score.gsm8k"]  # type: ignore[attr-defined]
    return True
