"""`@frozen`: a frozen dataclass whose methods are shared functions instead of code generated per class.

`@dataclass(frozen=True)` writes and compiles six methods for every class (0.7 ms each on a 2-core box; the
static check defines 35 such classes before it can start, about a quarter of its run). `@frozen` lets
`dataclasses` do the field bookkeeping only (0.06 ms), then installs generic `__init__`, `__repr__`, `__eq__`,
`__hash__`, `__setattr__` and `__delattr__` that read the fields at run time. The class is still a dataclass:
`dataclasses.fields`, `replace`, `asdict` and `is_dataclass` work, and instances behave as frozen dataclass
instances do (defaults and default factories, `__post_init__`, equality with the same class only, a hash of the
compared fields, `FrozenInstanceError` on assignment). Instances are a little slower to create; fa-doctor creates
hundreds per run, not millions. `tests/test_frozen.py` holds it to `@dataclass(frozen=True)`'s behaviour.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, TypeVar

_T = TypeVar("_T")
_MISSING = dataclasses.MISSING
_CLASSVAR = "_FIELD_CLASSVAR"


def _layout(cls: type) -> tuple[tuple[dataclasses.Field[Any], ...], tuple[str, ...], tuple[str, ...]]:
    """Fields with init (in order), the names compared, the names hashed; cached on the class."""
    cached = cls.__dict__.get("__frozen_layout__")
    if cached is None:
        fields = dataclasses.fields(cls)
        compared = tuple(f.name for f in fields if f.compare)
        hashed = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
        cached = (tuple(fields), compared, hashed)
        type.__setattr__(cls, "__frozen_layout__", cached)
    return cached


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    cls = type(self)
    fields = _layout(cls)[0]
    taking = [f for f in fields if f.init]
    if len(args) > len(taking):
        raise TypeError(f"{cls.__name__}.__init__() takes {len(taking)} arguments but {len(args)} were given")
    given = dict(zip((f.name for f in taking[: len(args)]), args, strict=True))
    for name in kwargs:
        if name in given:
            raise TypeError(f"{cls.__name__}.__init__() got multiple values for argument {name!r}")
    given.update(kwargs)
    unknown = set(given) - {f.name for f in taking}
    if unknown:
        raise TypeError(f"{cls.__name__}.__init__() got an unexpected keyword argument {sorted(unknown)[0]!r}")
    set_ = object.__setattr__
    for f in fields:
        if f.init and f.name in given:
            value = given[f.name]
        elif f.default is not _MISSING:
            value = f.default
        elif f.default_factory is not _MISSING:
            value = f.default_factory()
        elif f.init:
            raise TypeError(f"{cls.__name__}.__init__() missing 1 required positional argument: {f.name!r}")
        else:
            continue
        set_(self, f.name, value)
    post = getattr(self, "__post_init__", None)
    if post is not None:
        post()


def _repr(self: Any) -> str:
    fields = _layout(type(self))[0]
    shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields if f.repr)
    return f"{type(self).__qualname__}({shown})"


def _eq(self: Any, other: object) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = _layout(type(self))[1]
    return bool(tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names))


def _hash(self: Any) -> int:
    return hash(tuple(getattr(self, n) for n in _layout(type(self))[2]))


def _setattr(self: Any, name: str, value: object) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")


def _frozen(cls: type[_T]) -> type[_T]:
    if cls.__dict__.get("__doc__") is None:
        cls.__doc__ = cls.__name__  # else dataclasses computes inspect.signature(cls) for a docstring
    cls = dataclasses.dataclass(init=False, repr=False, eq=False)(cls)
    own = cls.__dict__
    methods = {"__init__": _init, "__repr__": _repr, "__eq__": _eq, "__hash__": _hash}
    for name, function in methods.items():
        if name not in own or (name == "__hash__" and own[name] is None and "__eq__" in own):
            type.__setattr__(cls, name, function)
    type.__setattr__(cls, "__setattr__", _setattr)
    type.__setattr__(cls, "__delattr__", _delattr)
    type.__setattr__(cls, "__match_args__", tuple(f.name for f in dataclasses.fields(cls) if f.init))  # type: ignore[arg-type]
    return cls


if TYPE_CHECKING:
    from typing_extensions import dataclass_transform

    @dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
    def frozen(cls: type[_T]) -> type[_T]: ...

else:
    frozen = _frozen
