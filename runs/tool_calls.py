"""What the tool registry (``runs.tools``) gives the rest of the code: a tool call checked against
its tool's own argument model (``ToolCall``), the run an agent is given and the bodies that create
it (``RunTask``, ``AgentConfig``, ``RunCreateIn``), an external agent's action (``ActionIn``), the
OpenAI-compatible agent's function schemas and docs/agents.md's tool table. All of it is derived
from the registry: a new tool needs no edit here.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    Field,
    GetJsonSchemaHandler,
    JsonValue,
    StringConstraints,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from core.contracts import Closed, ComputerId
from executor import contracts as executor_contracts
from runs.contracts import IdempotencyKey
from runs.tools import TOOLS, Tool, ToolName, tool_named


def tool_schemas() -> list[dict[str, Any]]:
    """The tools as OpenAI-compatible function schemas."""
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.args.model_json_schema()},
        }
        for t in TOOLS.values()
    ]


def tool_enums(tool: Tool) -> dict[str, list[Any]]:
    """Each argument of the tool that takes one of a fixed set of values, with the values (from its schema)."""
    enums: dict[str, list[Any]] = {}
    for name, prop in tool.args.model_json_schema().get("properties", {}).items():
        if any("enum" not in option and option.get("type") != "null" for option in prop.get("anyOf", [])):
            continue  # a named value or something else (press: one character or a named key)
        for option in [prop, *prop.get("anyOf", [])]:
            if "enum" in option:
                enums[name] = [value for value in option["enum"] if value is not None]
    return enums


def tool_table() -> str:
    """docs/agents.md's table of tools, generated from the registry: every fixed set of values is listed."""
    rows = ["| tool | arguments | what it does |", "|---|---|---|"]
    for t in TOOLS.values():
        arguments = t.arguments_doc
        for name, values in tool_enums(t).items():
            arguments += f"; `{name}` is one of " + ", ".join(f"`{v}`" for v in values)
        rows.append(f"| `{t.name}` | {arguments} | {t.description} |")
    return "\n".join(rows) + "\n"


# --- A tool call, and the run an agent is given --------------------------------------


def _accepts_no_arguments(args: type[BaseModel]) -> bool:
    """Whether a call may leave ``arguments`` out (click needs a selector or a point, though no
    field of its own is required)."""
    try:
        args.model_validate({})
    except ValidationError:
        return False
    return True


def one_variant_per_tool(name: str, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
    """The JSON Schema of a model with ``tool`` and ``arguments``: one variant per tool with that tool's
    own arguments, so that what the schema allows is what the server accepts."""
    schema = handler.resolve_ref_schema(handler(core_schema))
    variants = []
    for tool_name, tool in TOOLS.items():
        arguments = handler(tool.args.__pydantic_core_schema__)
        needs_arguments = not _accepts_no_arguments(tool.args)
        required = [p for p in schema.get("required", []) if p not in ("tool", "arguments")]
        variants.append(
            {
                "type": "object",
                "title": f"{name} {tool_name}",
                "properties": {**schema["properties"], "tool": {"const": tool_name, "type": "string"}, "arguments": arguments},
                "required": ["tool", *(["arguments"] if needs_arguments else []), *required],
                "additionalProperties": False,
            }
        )
    described: dict[str, Any] = {k: schema[k] for k in ("title", "description") if k in schema}
    return {**described, "oneOf": variants}


class ToolCall(Closed):
    tool: ToolName  # type: ignore[valid-type]
    arguments: dict[str, JsonValue] = Field(default_factory=dict, validate_default=True)  # an omitted one is checked too

    @field_validator("arguments")
    @classmethod
    def _arguments_fit_the_tool(cls, arguments: dict[str, JsonValue], info: ValidationInfo) -> dict[str, JsonValue]:
        # A field validator, so that an error names the argument by its full path
        # (``task.steps.0.arguments.url``); with no valid tool there is nothing to fit.
        if "tool" in info.data:
            tool_named(info.data["tool"]).args.model_validate(arguments)
        return arguments

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return one_variant_per_tool(cls.__name__, core_schema, handler)

    @property
    def spec(self) -> Tool:
        return tool_named(self.tool)

    def parsed(self) -> Any:
        """The arguments as the tool's model (raises ValidationError when they do not fit)."""
        return tool_named(self.tool).args.model_validate(self.arguments)


class ScriptedStep(ToolCall):
    """One step of a scripted run's ``task.steps``: a tool call and what a tool error does to the run.

    ``on_error``: ``fail`` (the default) ends the run ``failed`` with the tool's error (its code and
    category) when the step's result has ``isError``; ``continue`` goes on to the next step. A portal
    refusing a credential is a normal result, never an error.
    """

    on_error: Literal["fail", "continue"] = "fail"

    def call(self) -> ToolCall:
        return ToolCall(tool=self.tool, arguments=self.arguments)


class AgentConfig(Closed):
    # openai_compatible is available only when RAM_LLM_BASE_URL is configured; external
    # runs take their decisions one action at a time from the harness (POST /api/runs/{id}/actions).
    type: Literal["scripted", "openai_compatible", "external"] = "scripted"
    browser: executor_contracts.BrowserSettings = Field(default_factory=executor_contracts.BrowserSettings)


class RunTask(Closed):
    goal: Annotated[str, StringConstraints(min_length=1, max_length=4000)]
    steps: list[ScriptedStep] = Field(default_factory=list, max_length=200)

    def stored(self) -> dict[str, Any]:
        """The task as the run keeps (and shows) it: a step's ``on_error`` only when the harness gave it."""
        data = self.model_dump(mode="json")
        data["steps"] = [
            step.model_dump(mode="json", exclude=None if "on_error" in step.model_fields_set else {"on_error"})
            for step in self.steps
        ]
        return data


class ActionIn(Closed):
    """One tool call of the registry sent by an external agent's harness."""

    tool: Annotated[str, StringConstraints(min_length=1, max_length=60)]
    arguments: dict[str, JsonValue] = Field(default_factory=dict)
    idempotency_key: IdempotencyKey

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        # Validated by ``runs.external`` (an unknown tool or arguments that do not fit are a 400 naming the tool).
        return one_variant_per_tool(cls.__name__, core_schema, handler)


class RunCreateIn(Closed):
    task: RunTask
    computer_id: ComputerId
    agent: AgentConfig = Field(default_factory=AgentConfig)
    max_model_calls: int = Field(default=20, ge=1, le=1000)
    recording: bool = Field(
        default=True,
        description="Record the run's screen (masked at the source; a person's control is on its timeline only "
        "unless the account opted in). false: this run has no recording. RAM_RECORDING=false turns recordings off.",
    )
