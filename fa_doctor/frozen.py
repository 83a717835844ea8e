"""`@frozen` (and `@mutable`): dataclasses without the `dataclasses` module and without code generated per class.

`@dataclass(frozen=True)` writes and compiles six methods for every class (0.7 ms each on a 2-core box; the static
check defines 35 such classes), and importing `dataclasses` loads `inspect`, `ast`, `dis` and `tokenize` (about
6 ms). `@frozen` reads the fields from the annotations, once, and installs shared `__init__`, `__repr__`,
`__eq__`, `__hash__`, `__setattr__` and `__delattr__` that read them at run time (0.02 ms a class). Instances
behave as frozen dataclass instances do: defaults and `field(default_factory=...)`, `__post_init__`, equality
with the same class only, a hash of the compared fields, `FrozenInstanceError` on assignment, `__match_args__`.

`replace`, `fields` and `asdict` here do what the `dataclasses` functions do, for fa-doctor's own code. The classes
are dataclasses to the standard library too: the first use of `__dataclass_fields__` (by `dataclasses.replace`,
`fields`, `asdict`, `is_dataclass`, in tests or elsewhere) imports `dataclasses` and gives it real `Field`s.
Instances are a little slower to create; fa-doctor creates hundreds per run, not millions.
`tests/test_frozen.py` holds all of it to `@dataclass(frozen=True)`'s behaviour.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

_T = TypeVar("_T")


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


class FrozenInstanceError(AttributeError):
    """Raised on assignment to a field; `dataclasses.FrozenInstanceError` catches it too (checked in the tests
    through `except AttributeError`, its base, as dataclasses' own is)."""


class Field:
    __slots__ = ("compare", "default", "default_factory", "hash", "init", "name", "repr", "type")

    def __init__(  # made by field(), which has the defaults
        self, default: Any, default_factory: Any, init: bool, repr: bool, hash: bool | None, compare: bool
    ) -> None:
        if default is not MISSING and default_factory is not MISSING:
            raise ValueError("cannot specify both default and default_factory")
        self.name, self.type = "", ""
        self.default, self.default_factory = default, default_factory
        self.init, self.repr, self.hash, self.compare = init, repr, hash, compare


def field(
    *,
    default: Any = MISSING,
    default_factory: Any = MISSING,
    init: bool = True,
    repr: bool = True,
    hash: bool | None = None,
    compare: bool = True,
) -> Any:
    """`dataclasses.field`, for @frozen classes."""
    return Field(default, default_factory, init, repr, hash, compare)


class _Layout:
    __slots__ = ("compared", "fields", "hashed", "names", "shown", "taking")

    def __init__(self, fields: dict[str, Field]) -> None:
        self.fields = tuple(fields.values())
        self.taking = tuple(f for f in self.fields if f.init)
        self.names = frozenset(f.name for f in self.taking)
        self.compared = tuple(f.name for f in self.fields if f.compare)
        self.hashed = tuple(f.name for f in self.fields if (f.compare if f.hash is None else f.hash))
        self.shown = tuple(f.name for f in self.fields if f.repr)


def _collect(cls: type) -> dict[str, Field]:
    out: dict[str, Field] = {}
    for base in reversed(cls.__mro__[1:]):
        layout = base.__dict__.get("__frozen_layout__")
        if layout is not None:
            out.update((f.name, f) for f in layout.fields)
    # The class's own annotations (3.10+ gives a class without any an empty dict; 3.14 makes them on demand).
    # Not inspect.get_annotations: not importing inspect is half the point.
    own = cls.__dict__.get("__annotations__")  # noqa: RUF063
    for name, annotation in (own if own is not None else cls.__annotations__).items():
        if "ClassVar" in str(annotation):
            continue
        value = _ours(cls.__dict__.get(name, MISSING))
        made = value if isinstance(value, Field) else field(default=value)
        made.name, made.type = name, annotation
        if isinstance(value, Field):  # as dataclasses does: the class attribute is the default, or nothing
            if made.default is MISSING:
                type.__delattr__(cls, name)
            else:
                type.__setattr__(cls, name, made.default)
        out[name] = made
    seen_default = False
    for f in out.values():
        if f.init and (f.default is not MISSING or f.default_factory is not MISSING):
            seen_default = True
        elif f.init and seen_default:
            raise TypeError(f"non-default argument {f.name!r} follows default argument")
    return out


def _ours(value: Any) -> Any:
    """A `dataclasses.field(...)` written in a @frozen class works as `field(...)` does."""
    if type(value).__module__ != "dataclasses" or type(value).__name__ != "Field":
        return value
    import sys

    missing = sys.modules["dataclasses"].MISSING
    return Field(
        MISSING if value.default is missing else value.default,
        MISSING if value.default_factory is missing else value.default_factory,
        value.init,
        value.repr,
        value.hash,
        value.compare,
    )


def _layout(cls: type) -> _Layout:
    return cls.__dict__["__frozen_layout__"]  # type: ignore[no-any-return]


def _init(self: Any, *args: Any, **kwargs: Any) -> None:
    cls = type(self)
    layout = _layout(cls)
    taking = layout.taking
    if len(args) > len(taking):
        raise TypeError(f"{cls.__name__}.__init__() takes {len(taking)} arguments but {len(args)} were given")
    given = {f.name: value for f, value in zip(taking, args)}  # noqa: B905  # args is the shorter, checked above
    for name, value in kwargs.items():
        if name in given:
            raise TypeError(f"{cls.__name__}.__init__() got multiple values for argument {name!r}")
        if name not in layout.names:
            raise TypeError(f"{cls.__name__}.__init__() got an unexpected keyword argument {name!r}")
        given[name] = value
    set_ = object.__setattr__
    for f in layout.fields:
        if f.init and f.name in given:
            set_(self, f.name, given[f.name])
        elif f.default is not MISSING:
            set_(self, f.name, f.default)
        elif f.default_factory is not MISSING:
            set_(self, f.name, f.default_factory())
        elif f.init:
            raise TypeError(f"{cls.__name__}.__init__() missing 1 required positional argument: {f.name!r}")
    post = getattr(self, "__post_init__", None)
    if post is not None:
        post()


def _repr(self: Any) -> str:
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in _layout(type(self)).shown)
    return f"{type(self).__qualname__}({shown})"


def _eq(self: Any, other: object) -> Any:
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = _layout(type(self)).compared
    return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)


def _hash(self: Any) -> int:
    return hash(tuple(getattr(self, n) for n in _layout(type(self)).hashed))


def _setattr(self: Any, name: str, value: object) -> None:
    raise _frozen_error()(f"cannot assign to field {name!r}")


def _delattr(self: Any, name: str) -> None:
    raise _frozen_error()(f"cannot delete field {name!r}")


def _frozen_error() -> type[AttributeError]:
    """dataclasses' own error where that module is loaded already (code that catches it keeps working)."""
    import sys

    module = sys.modules.get("dataclasses")
    return getattr(module, "FrozenInstanceError", FrozenInstanceError)


class _StandardFields:
    """`__dataclass_fields__` for the standard library, made on first use (it imports `dataclasses`)."""

    def __get__(self, instance: object, cls: type) -> dict[str, Any]:
        import dataclasses

        shadow: dict[str, Any] = {"__annotations__": {}, "__doc__": cls.__name__}
        for f in _layout(cls).fields:
            shadow["__annotations__"][f.name] = f.type
            shadow[f.name] = dataclasses.field(
                default=f.default if f.default is not MISSING else dataclasses.MISSING,
                default_factory=f.default_factory if f.default_factory is not MISSING else dataclasses.MISSING,
                init=f.init,
                repr=f.repr,
                hash=f.hash,
                compare=f.compare,
            )
        made: Any = dataclasses.dataclass(init=False, repr=False, eq=False)(type(cls.__name__, (), shadow))
        real: dict[str, Any] = made.__dataclass_fields__
        type.__setattr__(cls, "__dataclass_fields__", real)
        return real


def _record(cls: type[_T], is_frozen: bool) -> type[_T]:
    layout = _Layout(_collect(cls))
    own = dict(cls.__dict__)
    type.__setattr__(cls, "__frozen_layout__", layout)
    methods = {"__init__": _init, "__repr__": _repr, "__eq__": _eq}
    for name, function in methods.items():
        if name not in own:
            type.__setattr__(cls, name, function)
    if not is_frozen:  # as dataclasses: eq without frozen leaves instances unhashable
        if "__hash__" not in own or own["__hash__"] is None:
            type.__setattr__(cls, "__hash__", None)
    elif "__hash__" not in own or (own["__hash__"] is None and "__eq__" in own):
        type.__setattr__(cls, "__hash__", _hash)
    if is_frozen:
        type.__setattr__(cls, "__setattr__", _setattr)
        type.__setattr__(cls, "__delattr__", _delattr)
    type.__setattr__(cls, "__match_args__", tuple(f.name for f in layout.taking))
    type.__setattr__(cls, "__dataclass_fields__", _StandardFields())
    return cls


def _frozen(cls: type[_T]) -> type[_T]:
    return _record(cls, True)


def _mutable(cls: type[_T]) -> type[_T]:
    return _record(cls, False)


def fields(obj: Any) -> tuple[Any, ...]:
    if not is_dataclass(obj):  # a standard-library dataclass
        import dataclasses

        return dataclasses.fields(obj)
    return _layout(obj if isinstance(obj, type) else type(obj)).fields


def replace(obj: _T, **changes: Any) -> _T:
    if not is_dataclass(obj):  # a standard-library dataclass
        import dataclasses

        return dataclasses.replace(obj, **changes)  # type: ignore[type-var]
    layout = _layout(type(obj))
    for f in layout.fields:
        if not f.init and f.name in changes:
            raise ValueError(f"field {f.name} is declared with init=False, it cannot be specified with replace()")
    values = {f.name: getattr(obj, f.name) for f in layout.taking}
    values.update(changes)
    return type(obj)(**values)


def is_dataclass(obj: Any) -> bool:
    """A class made by @frozen or @mutable, or one of its instances."""
    return "__frozen_layout__" in getattr(obj if isinstance(obj, type) else type(obj), "__dict__", {})


def astuple(obj: Any) -> tuple[Any, ...]:
    """dataclasses.astuple: fields to a tuple, nested instances to tuples too."""
    return tuple(
        astuple(v) if is_dataclass(v) and not isinstance(v, type) else v
        for v in (getattr(obj, f.name) for f in fields(obj))
    )


def asdict(obj: Any) -> dict[str, Any]:
    """dataclasses.asdict: fields to a dict, recursing into frozen instances, lists, tuples and dicts."""
    if not is_dataclass(obj) or isinstance(obj, type):
        raise TypeError("asdict() should be called on dataclass instances")
    return {f.name: _plain(getattr(obj, f.name)) for f in fields(obj)}


def _plain(obj: Any) -> Any:
    if is_dataclass(obj) and not isinstance(obj, type):
        return asdict(obj)
    if hasattr(type(obj), "__dataclass_fields__") and not isinstance(obj, type):  # a plain dataclass
        import dataclasses

        return dataclasses.asdict(obj)
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        return type(obj)(*[_plain(v) for v in obj])
    if isinstance(obj, (list, tuple)):
        return type(obj)(_plain(v) for v in obj)
    if isinstance(obj, dict):
        return type(obj)((_plain(k), _plain(v)) for k, v in obj.items())
    import copy

    return copy.deepcopy(obj)


if TYPE_CHECKING:
    from typing_extensions import dataclass_transform

    @dataclass_transform(frozen_default=True, field_specifiers=(field, Field))
    def frozen(cls: type[_T]) -> type[_T]: ...

    @dataclass_transform(field_specifiers=(field, Field))
    def mutable(cls: type[_T]) -> type[_T]: ...

else:
    frozen, mutable = _frozen, _mutable
