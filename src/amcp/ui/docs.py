"""``/docs``: the API reference rendered on the server from the app's own OpenAPI document.

FastAPI's ``/docs`` loads Swagger UI from a CDN and starts it with an inline script, so it
was blank offline and cannot run under the inspector's CSP (no inline scripts). This page
needs neither: every operation with its parameters, body, answers and the schemas they
name, as plain HTML with the inspector's stylesheet; ``/openapi.json`` stays the
machine-readable source for clients and code generators.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import HTMLResponse

if TYPE_CHECKING:
    from amcp.ui.context import UiContext

METHODS = ("get", "post", "put", "patch", "delete")


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    where: str  # query / path / header / body property
    type: str
    required: bool
    description: str


@dataclass(frozen=True, slots=True)
class Operation:
    method: str
    path: str
    summary: str
    description: str
    tag: str
    params: tuple[Field, ...]
    body: str  # "application/json: RememberIn" or ""
    responses: tuple[tuple[str, str], ...]  # (status, description + schema)

    @property
    def anchor(self) -> str:
        return f"{self.method}-{self.path}".replace("/", "-").replace("{", "").replace("}", "")


@dataclass(frozen=True, slots=True)
class Schema:
    name: str
    fields: tuple[Field, ...]


def type_of(schema: dict[str, Any]) -> str:
    """A short readable type for a JSON Schema fragment."""
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    if "anyOf" in schema:
        return " | ".join(type_of(s) for s in schema["anyOf"])
    if "enum" in schema:
        return " | ".join(str(v) for v in schema["enum"])
    kind = str(schema.get("type", "any"))
    if kind == "array":
        return f"{type_of(schema.get('items', {}))}[]"
    return kind


def _content(content: dict[str, Any]) -> str:
    return ", ".join(f"{ctype}: {type_of(v.get('schema', {}))}" for ctype, v in content.items())


def operations(doc: dict[str, Any]) -> list[Operation]:
    out = []
    for path, item in doc.get("paths", {}).items():
        for method in METHODS:
            op = item.get(method)
            if not isinstance(op, dict):
                continue
            params = tuple(
                Field(p["name"], p.get("in", ""), type_of(p.get("schema", {})),
                      bool(p.get("required")), str(p.get("description", "")))
                for p in op.get("parameters", ())
            )
            body = _content(op.get("requestBody", {}).get("content", {}))
            responses = tuple(
                (code, " ".join(x for x in (str(r.get("description", "")),
                                            _content(r.get("content", {}))) if x))
                for code, r in op.get("responses", {}).items()
            )
            out.append(Operation(method.upper(), path, str(op.get("summary", "")),
                                 str(op.get("description", "")), (op.get("tags") or [""])[0],
                                 params, body, responses))
    return out


def schemas(doc: dict[str, Any]) -> list[Schema]:
    out = []
    for name, sch in sorted(doc.get("components", {}).get("schemas", {}).items()):
        required = set(sch.get("required", ()))
        fields = tuple(
            Field(prop, "body", type_of(spec), prop in required, str(spec.get("description", "")))
            for prop, spec in sch.get("properties", {}).items()
        )
        out.append(Schema(name, fields))
    return out


def router(ctx: UiContext, app: FastAPI) -> APIRouter:
    r = APIRouter(include_in_schema=False)

    @r.get("/docs", response_class=HTMLResponse)
    def docs(request: Request) -> HTMLResponse:
        doc = app.openapi()
        return ctx.render(request, None, "docs.html", info=doc.get("info", {}),
                          ops=operations(doc), schemas=schemas(doc))

    return r


__all__ = ["Operation", "Schema", "operations", "router", "schemas", "type_of"]
