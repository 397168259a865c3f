"""What a run may change outside its model: the classes the model is built
from. A prepare() or step that patches a method on the class
(`Block.forward = checkpointed`) changes every model of that class, so
every later run's model too; runs must start from the same class state.

ClassState(model) notes, once per verify() call, the attributes of every
class of the model's modules (their MRO, torch's own Linear, LayerNorm...
included), except `object` and torch.nn.Module itself, whose __init__ and
__setstate__ torch.compile patches on its first compile in a process
(Dynamo's generation tagging): torch's doing, not a run's. changes() names each attribute that is not what it was
("Block.forward"), restore() puts them back: the trainer calls restore()
after every run and before every prepare() (a prepare called again for a
run's warm-up, memory map and recorded steps patches the pristine class,
not its own earlier patch), so every run starts from the state verify()
began with, by construction."""
from __future__ import annotations

import torch

_MISSING = object()
# Set by Python itself, never a run's doing (and not assignable on some classes).
_UNWATCHED = frozenset({"__dict__", "__weakref__", "__doc__", "__module__", "__qualname__"})


def _same(a: object, b: object) -> bool:
    """The same attribute value: the same object, or an equal number or
    string assigned again (a fresh int object of the same value)."""
    if a is b:
        return True
    simple = (int, float, str, bytes, bool)
    return type(a) in simple and type(a) is type(b) and a == b


class ClassState:
    """The attributes of the classes `model`'s modules are made of, as they
    stand now (a shallow copy of each class's __dict__)."""

    def __init__(self, model: torch.nn.Module):
        classes: dict[type, None] = {}
        for module in model.modules():
            for cls in type(module).__mro__:
                if cls not in (object, torch.nn.Module):
                    classes.setdefault(cls, None)
        self.saved = {cls: dict(vars(cls)) for cls in classes}

    def changes(self) -> list[str]:
        """"Class.attribute" of each attribute set, replaced or deleted
        since the state was noted, in class then attribute order."""
        out = []
        for cls, saved in self.saved.items():
            now = vars(cls)
            for key in sorted(set(saved) | set(now)):
                if key not in _UNWATCHED and not _same(saved.get(key, _MISSING), now.get(key, _MISSING)):
                    out.append(f"{cls.__qualname__}.{key}")
        return out

    def restore(self) -> None:
        """Every watched attribute back to what it was; one added since is removed."""
        for cls, saved in self.saved.items():
            now = dict(vars(cls))
            for key in now.keys() - saved.keys() - _UNWATCHED:
                delattr(cls, key)
            for key, value in saved.items():
                if key not in _UNWATCHED and not _same(value, now.get(key, _MISSING)):
                    setattr(cls, key, value)


def patched_text(run_name: str, changed: list[str]) -> str:
    """The note a run that patched classes carries (the judge puts it in
    the run's reason): 'run X patched Block.forward on the class ...'."""
    shown = ", ".join(changed[:4]) + (f" and {len(changed) - 4} more" if len(changed) > 4 else "")
    return f"run {run_name} patched {shown} on the class (undone before the next run)"
