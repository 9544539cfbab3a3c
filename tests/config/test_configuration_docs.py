"""docs/configuration.md is the generator's output, and every setting is described."""

from __future__ import annotations

import pytest
from pydantic.fields import FieldInfo

from backend.config.docs import UndocumentedSetting, render
from backend.config.settings import Settings
from tests.support.live_server import ROOT

REGENERATE = ".venv/bin/python -m backend.config.docs > docs/configuration.md"


def test_the_page_is_what_the_generator_writes() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert page == render(), f"docs/configuration.md is stale: run `{REGENERATE}`"


def test_every_setting_has_a_description() -> None:
    undescribed = [
        name for name, info in Settings.model_fields.items() if not (info.description or "").strip()
    ]
    assert not undescribed


def test_every_setting_is_on_the_page() -> None:
    page = render()
    for name in Settings.model_fields:
        assert f"| `{name}` |" in page


def test_a_setting_without_a_description_stops_the_generator() -> None:
    fields = dict(Settings.model_fields)
    fields["HOST"] = FieldInfo(default="127.0.0.1")
    with pytest.raises(UndocumentedSetting, match="without a description: HOST"):
        render(fields)


def test_a_setting_in_no_group_stops_the_generator() -> None:
    fields = dict(Settings.model_fields) | {"NEW_SETTING": FieldInfo(default=1, description="x")}
    with pytest.raises(UndocumentedSetting, match=r"in no group .*: NEW_SETTING"):
        render(fields)
