"""The notification plan's index of a scan's changes finds every generation of an id given.

A scan refreshes or resolves one generation of each incident, held in a plain map; an id
given at two generations (a hand-made set of changes) keeps both, in the order given.
"""

from __future__ import annotations

import dataclasses

from mlcopilot.store.chunks import batches
from mlcopilot.store.notify_sql import _ById
from tests.test_model_incident import incident


def test_each_id_gives_its_generations_in_the_order_given_and_others_none() -> None:
    a1, b1 = incident("urn:li:dataset:a", "a"), incident("urn:li:dataset:b", "b")
    a2 = dataclasses.replace(a1, generation=2)
    index = _ById.of([a1, b1, a2])
    assert index.get(a1.id) == (a1, a2)
    assert index.get(b1.id) == (b1,)
    assert index.get("no-such-id") == ()


def test_batches_take_an_iterable_a_part_at_a_time_in_order() -> None:
    assert list(batches(iter(range(7)), 3)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(batches([], 3)) == []
