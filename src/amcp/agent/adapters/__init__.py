"""Framework adapters over ``Memory``: a LangGraph ``BaseStore`` (``langgraph_store``) and an
OpenAI Agents SDK ``Session`` (``agents_session``). Import the submodule you need; each
imports its framework, which this package does not require."""

from __future__ import annotations
