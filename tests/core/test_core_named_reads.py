"""Named reads of view results (agents/core/chain.py): a struct's fields and a view's several
outputs by their ABI names, so that no role reads a contract result by position."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from agents.core.chain import named_call, named_outputs


def view(outputs: list[dict], result: object) -> SimpleNamespace:
    """A bound contract function as web3 has it: its ABI entry and `call()`."""
    return SimpleNamespace(abi={"name": "v", "outputs": outputs}, call=lambda: result)


def test_named_call_names_the_fields_of_one_struct():
    fn = view([{"name": "", "type": "tuple", "components": [{"name": "a"}, {"name": "b"}]}], (1, 2))
    assert named_call(fn) == {"a": 1, "b": 2}


def test_named_outputs_names_several_outputs():
    fn = view([{"name": "status"}, {"name": "attestationHash"}], [2, b"\x01"])
    assert named_outputs(fn) == {"status": 2, "attestationHash": b"\x01"}


def test_named_outputs_refuses_a_view_it_cannot_name():
    with pytest.raises(ValueError, match="several named outputs"):
        named_outputs(view([{"name": "", "type": "tuple"}], (1, 2)))
    with pytest.raises(ValueError, match="several named outputs"):
        named_outputs(view([{"name": "a"}, {"name": ""}], [1, 2]))


def test_a_result_of_another_length_than_the_abi_fails():
    with pytest.raises(ValueError):
        named_outputs(view([{"name": "a"}, {"name": "b"}], [1, 2, 3]))
