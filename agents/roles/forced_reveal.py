"""A forced-error reveal (PROTOCOL §8.1): which checkpoints the judgement reads, and the
`IJobManager.ForcedReveal` tuple that carries them. Pure; the solver agent and the tests build
their reveals here, so the rule lives in one place beside its contract (`ForcedErrorJudge`)."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from agents.training.merkle import CHECKPOINT_DOMAIN, checkpoint_root, final_proof, list_proof


def judged_checkpoints(samples: Iterable[Iterable[int]], perturbed: Collection[int]) -> list[int]:
    """The checkpoints `ForcedErrorJudge._verdict` reads, ascending: for each drawn verifier's
    sampled segment s, a perturbed start s and the end s + 1 it is judged against, or else a
    perturbed end s + 1."""
    needed: set[int] = set()
    for segments in samples:
        for s in segments:
            if s in perturbed:
                needed |= {s, s + 1}
            elif s + 1 in perturbed:
                needed.add(s + 1)
    return sorted(needed)


def forced_reveal(
    secret: bytes,
    published: list[bytes],
    true: list[bytes],
    checkpoints: list[int],
    end_roots: list[list[bytes]],
) -> tuple:
    """`IJobManager.ForcedReveal`: the secret, the true list's root C, and each checkpoint's
    published and true entry with its list proof, each drawn verifier's attested end roots
    (empty for one that did not attest), and the proof that C's last entry is the final state
    root (the list's last entry; never perturbed, so the published list's too)."""
    return (
        secret,
        checkpoint_root(true),
        list(checkpoints),
        [published[c] for c in checkpoints],
        [list_proof(CHECKPOINT_DOMAIN, published, c).siblings for c in checkpoints],
        [true[c] for c in checkpoints],
        [list_proof(CHECKPOINT_DOMAIN, true, c).siblings for c in checkpoints],
        end_roots,
        final_proof(true),
    )
