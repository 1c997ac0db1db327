"""The compatibility contract with HAMi as the webhook applies it: a pod per row."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from arkgpu.k8s import hami_compat as hc
from e2e.hami_pods import EXAMPLES, example, row_id, rows

from .builders import admission, review

DOC = Path(__file__).resolve().parents[3] / "docs" / "MIGRATING-FROM-HAMI.md"
BEGIN, END = "<!-- contract table: begin -->\n", "<!-- contract table: end -->"


def _answer(obj: dict[str, Any], mutate: bool = False) -> dict[str, Any]:
    handlers = admission()
    response: dict[str, Any] = (handlers.mutate if mutate else handlers.validate)(review(obj))[
        "response"
    ]
    return response


def _pod(row: hc.Row) -> dict[str, Any]:
    obj = example(row).pod("app")
    obj["metadata"]["namespace"] = "team"
    obj["spec"]["schedulerName"] = "default-scheduler"
    return obj


def test_every_row_has_an_example_and_no_format_verb() -> None:
    """Each row is exercised (an example pod), and no text the user reads has a ``%``."""
    assert {(r.field, r.value) for r in hc.ROWS} == set(EXAMPLES)
    for r in hc.ROWS:
        assert "%" not in r.arkgpu, r
        assert "%" not in r.hami, r


def test_docs_carry_the_contract_table() -> None:
    """docs/MIGRATING-FROM-HAMI.md has exactly the table the code writes."""
    text = DOC.read_text(encoding="utf-8")
    assert BEGIN in text, "the contract table's begin marker is missing"
    assert END in text, "the contract table's end marker is missing"
    shown = text.split(BEGIN, 1)[1].split(END, 1)[0]
    assert shown == hc.markdown_table(), "regenerate: python -m arkgpu.k8s.hami_compat"


@pytest.mark.parametrize("row", rows(hc.Behaviour.REFUSED), ids=row_id)
def test_refused_rows_are_refused_with_their_sentence(row: hc.Row) -> None:
    response = _answer(_pod(row))
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert row.arkgpu in message, message
    assert "\n" not in message


@pytest.mark.parametrize("row", rows(hc.Behaviour.WARNED), ids=row_id)
def test_warned_rows_are_admitted_with_a_warning(row: hc.Row) -> None:
    response = _answer(_pod(row))
    assert response["allowed"] is True, response
    assert any(row.arkgpu in w for w in response.get("warnings", [])), response


@pytest.mark.parametrize("row", rows(hc.Behaviour.SAME, hc.Behaviour.DIFFERENT), ids=row_id)
def test_supported_rows_are_admitted_without_a_word(row: hc.Row) -> None:
    obj = _pod(row)
    mutated = _answer(obj, mutate=True)
    assert mutated["allowed"] is True
    if row.field == hc.RESOURCE_PRIORITY:  # the mutating webhook removes priority 1
        ops = json.loads(base64.b64decode(mutated["patch"]))
        path = "/spec/containers/0/resources/limits/nvidia.com~1priority"
        assert {"op": "remove", "path": path} in ops
        del obj["spec"]["containers"][0]["resources"]["limits"][hc.RESOURCE_PRIORITY]
    response = _answer(obj)
    assert response["allowed"] is True, response
    assert "warnings" not in response


def test_priority_in_requests_too_and_odd_values() -> None:
    """Priority 1 is removed from limits and requests; 2 is refused naming the field."""
    obj = _pod(hc.row(hc.RESOURCE_PRIORITY, "1"))
    resources = obj["spec"]["containers"][0]["resources"]
    resources["requests"] = dict(resources["limits"])
    ops = json.loads(base64.b64decode(_answer(obj, mutate=True)["patch"]))
    assert sum(op["op"] == "remove" for op in ops) == 2
    resources["limits"][hc.RESOURCE_PRIORITY] = "2"
    message = _answer(obj)["status"]["message"]
    assert message == "container 'main': nvidia.com/priority: expected 0 or 1 as in HAMi, got '2'"


def test_env_from_a_reference_is_not_judged() -> None:
    """A variable set from a reference (valueFrom) has no value to judge: admitted."""
    obj = _pod(hc.row(hc.ENV_DISABLE_CONTROL, "true"))
    obj["spec"]["containers"][0]["env"] = [
        {"name": hc.ENV_DISABLE_CONTROL, "valueFrom": {"configMapKeyRef": {"name": "x"}}}
    ]
    assert _answer(obj)["allowed"] is True
