"""Each route takes only the services it uses, never the whole `Services` bundle."""

from __future__ import annotations

import inspect
import typing
from collections.abc import Iterator

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from backend.api.main import ROUTERS
from backend.core.services import Services


def _calls(dependant: Dependant) -> Iterator[object]:
    for dependency in dependant.dependencies:
        yield dependency.call
        yield from _calls(dependency)


def _returns_services(call: object) -> bool:
    if not inspect.isfunction(call):  # a security scheme's instance (BearerUser)
        return False
    return typing.get_type_hints(call).get("return") is Services


def test_no_route_depends_on_every_service() -> None:
    routes = [route for router in ROUTERS for route in router.routes if isinstance(route, APIRoute)]
    assert len(routes) > 40  # every router was read
    broad = sorted(
        f"{route.methods} {route.path}"
        for route in routes
        if any(_returns_services(call) for call in _calls(route.dependant))
    )
    assert broad == []
