"""Float32 add/sub/mul/div: bit-exact against numpy float32 AND an exact rational reference."""

from __future__ import annotations

import pytest
from f32_strategies import PAIRS, batch_of, examples, min_cases
from f32ref import EXACT, np_binary
from hypothesis import given, settings

# 80 examples x 128 cases = 10,240 cases per operation in the CI profile (on Anvil).
EXAMPLES = 80


def _check(f32h, op: str, pairs: list[tuple[int, int]]) -> None:
    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]
    got = list(getattr(f32h, f"{op}Many")(a, b))
    want_np = np_binary(op, a, b)
    want_exact = [EXACT[op](x, y) for x, y in zip(a, b, strict=True)]
    for i, (x, y) in enumerate(zip(a, b, strict=True)):
        assert want_np[i] == want_exact[i], f"references disagree: {op}({x:#010x}, {y:#010x})"
        assert got[i] == want_exact[i], (
            f"{op}({x:#010x}, {y:#010x}) = {got[i]:#010x}, expected {want_exact[i]:#010x}"
        )


@pytest.mark.fuzz
@pytest.mark.parametrize("op", ["add", "sub", "mul", "div"])
def test_arith_matches_numpy_and_exact(f32h, op: str) -> None:
    checked = []

    @settings(max_examples=examples(EXAMPLES))
    @given(batch_of(PAIRS[op]))
    def prop(pairs: list[tuple[int, int]]) -> None:
        _check(f32h, op, pairs)
        checked.append(len(pairs))

    prop()
    assert sum(checked) >= min_cases(), f"only {sum(checked)} cases ran"
