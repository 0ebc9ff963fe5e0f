"""agents/core/bindings.py: every contract a role binds decodes its results by name — a struct
as a named tuple of its fields, several outputs as a named tuple of them — and a view whose
outputs have no names still decodes to all of its values (web3 alone keeps only the first)."""

from __future__ import annotations

import json

from web3 import Web3

from agents.core.bindings import bind, with_output_names
from agents.core.deploy import DEFAULT_ABI_DIR

ADDRESS = "0x" + "11" * 20


def exported() -> dict[str, list[dict]]:
    names = json.loads((DEFAULT_ABI_DIR / "index.json").read_text())["contracts"]
    return {n: json.loads((DEFAULT_ABI_DIR / f"{n}.json").read_text())["abi"] for n in names}


def test_every_function_with_several_outputs_has_distinct_output_names_once_bound():
    seen_unnamed = 0
    for name, abi in exported().items():
        seen_unnamed += sum(
            1
            for e in abi
            if e.get("type") == "function"
            and len(e["outputs"]) > 1
            and not all(o["name"] for o in e["outputs"])
        )
        for e in with_output_names(abi):
            if e.get("type") == "function" and len(e["outputs"]) > 1:
                names = [o["name"] for o in e["outputs"]]
                assert all(names) and len(set(names)) == len(names), (name, e["name"], names)
    assert seen_unnamed >= 1  # ForcedErrorJudge.isForced returns (bool, uint64): the case fixed


def test_a_bound_contract_decodes_unnamed_outputs_to_every_value():
    """decode_tuples over `returns (bool, uint64)`: both values, in order (no chain: web3's own
    result formatter, on the ABI bind gives the contract)."""
    from web3._utils.abi import named_tree, recursive_dict_to_namedtuple

    judge = bind(Web3(), "ForcedErrorJudge", ADDRESS)
    (fn,) = [e for e in judge.abi if e.get("name") == "isForced"]
    decoded = recursive_dict_to_namedtuple(named_tree(fn["outputs"], (True, 7)))
    assert tuple(decoded) == (True, 7)
    (raw,) = [e for e in exported()["ForcedErrorJudge"] if e.get("name") == "isForced"]
    # what web3 does with the exported ABI as it is: the two empty names collide
    assert tuple(recursive_dict_to_namedtuple(named_tree(raw["outputs"], (True, 7)))) == (7,)


def test_a_struct_result_reads_by_its_field_names():
    from web3._utils.abi import named_tree, recursive_dict_to_namedtuple

    manager = bind(Web3(), "JobManager", ADDRESS)
    (fn,) = [e for e in manager.abi if e.get("name") == "getDispute"]
    (d,) = recursive_dict_to_namedtuple(named_tree(fn["outputs"], [(5, ADDRESS, 9)]))
    assert (d.gameId, d.challenger, d.bond) == (5, ADDRESS, 9)


def test_a_connection_asks_the_node_its_chain_id_once():
    """connect caches eth_chainId, which web3 asks before every eth_call (to validate it): a
    bound contract's calls cost one request each. Counted at the transport."""
    from collections import Counter

    from agents.core.chain import connect, local_anvil

    with local_anvil() as url:
        w3 = connect(url)
        sent: Counter = Counter()
        send = type(w3.provider)._make_request.__get__(w3.provider)
        w3.provider._make_request = lambda method, data: sent.update([method]) or send(method, data)
        for _ in range(3):
            assert w3.eth.chain_id == 31337
            w3.eth.call({"to": ADDRESS, "data": "0x"})
        assert sent == Counter({"eth_call": 3})
