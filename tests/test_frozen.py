"""`@frozen` behaves as `@dataclass(frozen=True)` does: the same class written both ways, the same answers."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fa_doctor.frozen import frozen


def both(body: dict[str, Any], bases: tuple[type, ...] = ()) -> tuple[type, type]:
    made = []
    for decorate in (frozen, dataclass(frozen=True)):
        namespace = dict(body)
        namespace["__annotations__"] = dict(body.get("__annotations__", {}))
        made.append(decorate(type("Point", bases[len(made) : len(made) + 1] if bases else (), namespace)))
    return made[0], made[1]


BODY = {"__annotations__": {"x": "int", "y": "str", "tags": "tuple[str, ...]"}, "y": "a", "tags": field(default=())}
Mine, Theirs = both(BODY)
Factory, TheirFactory = both(
    {"__annotations__": {"x": "int", "items": "list[int]"}, "items": field(default_factory=list)}
)
Excluded, TheirExcluded = both(
    {"__annotations__": {"x": "int", "note": "str"}, "note": field(default="", compare=False, repr=False)}
)


@frozen
class Pickled:
    x: int
    tags: tuple[str, ...] = ()


HASHABLE = st.one_of(st.integers(-3, 3), st.text(max_size=3))


@given(x=HASHABLE, y=HASHABLE, x2=HASHABLE, y2=HASHABLE)
def test_equality_hash_and_repr_match_dataclasses(x: Any, y: Any, x2: Any, y2: Any) -> None:
    a, b, c, d = Mine(x, y), Mine(x=x2, y=y2), Theirs(x, y), Theirs(x=x2, y=y2)
    assert (a == b) == (c == d) and (hash(a) == hash(b)) == (hash(c) == hash(d))
    assert hash(a) == hash(c) and repr(a) == repr(c)
    assert a != c  # another class is never equal, as with dataclasses


def test_defaults_factories_and_errors() -> None:
    assert Factory(1).items == [] and Factory(1).items is not Factory(1).items
    for cls in (Mine, Theirs):
        with pytest.raises(TypeError):
            cls()
        with pytest.raises(TypeError):
            cls(1, "b", (), 4)
        with pytest.raises(TypeError):
            cls(1, z=2)
        with pytest.raises(TypeError):
            cls(1, x=2)
        with pytest.raises(dataclasses.FrozenInstanceError):
            cls(1).x = 2  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            del cls(1).x


def test_compare_false_and_repr_false() -> None:
    assert Excluded(1, "a") == Excluded(1, "b") and hash(Excluded(1, "a")) == hash(Excluded(1, "b"))
    assert repr(Excluded(1, "a")) == repr(TheirExcluded(1, "a")) == "Point(x=1)"


def test_the_dataclasses_api_still_works() -> None:
    a = Mine(1, "b", ("t",))
    assert dataclasses.is_dataclass(a) and [f.name for f in dataclasses.fields(a)] == ["x", "y", "tags"]
    assert dataclasses.replace(a, y="c") == Mine(1, "c", ("t",))
    assert dataclasses.asdict(a) == dataclasses.asdict(Theirs(1, "b", ("t",)))
    assert copy.deepcopy(a) == a and copy.copy(a) == a
    p = Pickled(1, ("t",))
    assert pickle.loads(pickle.dumps(p)) == p
    assert Mine.__match_args__ == Theirs.__match_args__


def test_post_init_inheritance_and_own_methods() -> None:
    seen: list[int] = []

    @frozen
    class Base:
        x: int

        def __post_init__(self) -> None:
            seen.append(self.x)
            if self.x < 0:
                raise ValueError("negative")

    @frozen
    class Child(Base):
        y: int = 0

        def __repr__(self) -> str:
            return "mine"

    c = Child(3, y=4)
    assert seen == [3] and (c.x, c.y) == (3, 4) and repr(c) == "mine" and c != Base(3)
    with pytest.raises(ValueError, match="negative"):
        Child(-1)
    with pytest.raises(TypeError):
        Child(1, 2, 3)


def test_mutable_behaves_as_a_plain_dataclass() -> None:
    from fa_doctor.frozen import field as our_field
    from fa_doctor.frozen import mutable

    @mutable
    class Mine:
        x: int
        items: list[int] = our_field(default_factory=list)

    @dataclass
    class Theirs:
        x: int
        items: list[int] = field(default_factory=list)

    a, b = Mine(1), Theirs(1)
    a.items.append(2)
    b.items.append(2)
    a.x = b.x = 5
    assert repr(a).replace("Mine", "T") == repr(b).replace("Theirs", "T") and a == Mine(5, [2])
    with pytest.raises(TypeError):
        hash(a)  # eq without frozen: unhashable, as dataclasses makes it


def test_our_helpers_match_the_standard_ones() -> None:
    from fa_doctor import frozen as ours

    nested = Pickled(3, ("a",))
    assert ours.asdict(Mine(1, "b", (nested,))) == dataclasses.asdict(Theirs(1, "b", (nested,)))
    assert ours.astuple(Mine(1)) == (1, "a", ()) == dataclasses.astuple(Theirs(1))
    assert ours.astuple(Mine(1, Pickled(2))) == dataclasses.astuple(Theirs(1, Pickled(2))) == (1, (2, ()), ())
    assert ours.replace(Mine(1), y="z") == Mine(1, "z") and ours.is_dataclass(Mine) and not ours.is_dataclass(1)
    assert [f.name for f in ours.fields(Mine)] == [f.name for f in dataclasses.fields(Theirs)]
    with pytest.raises(TypeError):
        ours.replace(Mine(1), nope=2)


def test_a_non_default_field_after_a_default_one_is_refused() -> None:
    with pytest.raises(TypeError, match="non-default argument"):
        frozen(type("Bad", (), {"__annotations__": {"a": "int", "b": "int"}, "a": 1}))
