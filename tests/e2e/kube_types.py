"""The official client's calls and models, typed as the tests use them.

The client's annotations (kubernetes 37) name only its generated models, but the client
sends a dict body as it is (``ApiClient.sanitize_for_serialization``) and, with
``_preload_content=False``, returns urllib3's response instead of a model (its docstrings
say so). The tests use both: raw JSON keeps every field (the models drop the ones they do
not know) and costs less CPU than decoding into models. The models also type every field
optional, even those the API server always fills (an object's metadata, a pod's spec).
These helpers say so once, for mypy, instead of an ignore or an assert at every use.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar, cast

import urllib3

T = TypeVar("T")


def body(doc: Mapping[str, Any]) -> Any:
    """``doc`` where the client's annotation names a model: the client sends it as it is."""
    return doc


def raw(answer: object) -> urllib3.BaseHTTPResponse:
    """The response of a call made with ``_preload_content=False``."""
    return cast(urllib3.BaseHTTPResponse, answer)


def loaded(answer: object) -> Any:
    """The JSON document of a call made with ``_preload_content=False``."""
    return json.loads(raw(answer).data)


def filled(value: T | None) -> T:
    """A field the test expects the API server to have filled (AssertionError if not)."""
    assert value is not None
    return value
