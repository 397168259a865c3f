"""Known-bug versions as patches around the real library, active only while
the run that asks for them trains.

`patch(owner, attr, variant, replacement)` installs, once, a dispatcher in
place of `owner.attr` that calls `replacement` while `variant` is selected
and the original otherwise. `select(variant)` is called at the start of
every step (`selecting(step, variant)` does it), so the baseline and every
other run see the library as shipped: verify() trains runs one after the
other, and a run's backward follows its step before the next step begins.
A replacement gets the original as its first argument."""
from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

_current: list[str | None] = [None]
_installed: dict[tuple[int, str], dict[str, Callable[..., Any]]] = {}


def select(variant: str | None) -> None:
    """Makes `variant`'s replacements live (None: the library as shipped)."""
    _current[0] = variant


def current() -> str | None:
    return _current[0]


def patch(owner: Any, attr: str, variant: str, replacement: Callable[..., Any]) -> None:
    """While `variant` is selected, `owner.attr(*a, **k)` calls
    `replacement(original, *a, **k)`. Idempotent per (owner, attr, variant)."""
    key = (id(owner), attr)
    table = _installed.get(key)
    if table is None:
        raw = owner.__dict__.get(attr, getattr(owner, attr)) if isinstance(owner, type) else getattr(owner, attr)
        is_static = isinstance(raw, staticmethod)
        original = raw.__func__ if is_static else raw
        table = {}

        @functools.wraps(original)
        def dispatch(*args: Any, **kwargs: Any) -> Any:
            fn = table.get(_current[0])
            return fn(original, *args, **kwargs) if fn else original(*args, **kwargs)

        setattr(owner, attr, staticmethod(dispatch) if is_static else dispatch)
        _installed[key] = table
    table[variant] = replacement


def selecting(step: Callable[[Any, Any], Any], variant: str | None) -> Callable[[Any, Any], Any]:
    """`step` with `variant` selected for its duration and the backward after it."""
    @functools.wraps(step)
    def run(model: Any, batch: Any) -> Any:
        select(variant)
        return step(model, batch)
    return run


def preparing(prepare: Callable[[Any], Any] | None, variant: str | None) -> Callable[[Any], Any] | None:
    """`prepare` with `variant` selected (a wrapper may be built differently)."""
    if prepare is None:
        return None

    @functools.wraps(prepare)
    def run(model: Any) -> Any:
        select(variant)
        return prepare(model)
    return run
