#!/usr/bin/python3
"""check_matmul.py OUTPUT: compares what monarch-run printed for matmul.mlir
with the same computation in single-process torch. Exits 1 on a mismatch."""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import monarch_output  # noqa: E402

M, K, N = 8, 12, 10
RANKS = 4  # host=2 x gpu=2, rank = 2*host + gpu


def a_of(r):  # matmul.mlir's %a on rank r
    return torch.sin(torch.arange(0, M * K, dtype=torch.float32).reshape(M, K) * 0.37 + r)


def b_of(r):  # matmul.mlir's %b on rank r
    return torch.cos(torch.arange(0, K * N, dtype=torch.float32).reshape(K, N) * 0.11 - r) * 1.5


c = [a_of(r) @ b_of(r) for r in range(RANKS)]
# reduce (gpu) sum: host h holds c[2h] + c[2h+1]; reduce () avg: mean of all.
s = [c[2 * (r // 2)] + c[2 * (r // 2) + 1] for r in range(RANKS)]
avg = sum(c) / RANKS
# Program order of matmul.mlir's fetches: (rank, expected value).
expected = [(r, c[r]) for r in range(RANKS)] + [(1, s[1]), (2, s[2]), (3, avg)]


def compare(fetches):
    problems = []
    if len(fetches) != len(expected):
        problems.append(f"{len(fetches)} fetched values, expected {len(expected)}")
    for i, (f, (rank, want)) in enumerate(zip(fetches, expected)):
        if f.error:
            problems.append(f"value {i}: error: {f.error}")
            continue
        if f.rank != rank:
            problems.append(f"value {i}: rank {f.rank}, expected {rank}")
        got = torch.tensor(f.value, dtype=torch.float32)
        if tuple(got.shape) != tuple(want.shape) or f.shape != tuple(want.shape):
            problems.append(f"value {i}: shape {f.shape}, expected {tuple(want.shape)}")
            continue
        if not torch.allclose(got, want, rtol=1e-4, atol=1e-4):
            diff = (got - want).abs().max().item()
            problems.append(f"value {i} (rank {rank}): max abs difference {diff:g}\n got {got}\n want {want}")
    return problems


def main():
    fetches = monarch_output.parse(open(sys.argv[1]).read())
    problems = compare(fetches)
    # The comparison itself must be able to fail: a perturbed copy must not pass.
    if not problems:
        fetches[0].value[3][4] += 0.01
        if not compare(fetches):
            problems.append("checker self-test: a perturbed value passed")
    if problems:
        print("\n".join(["MISMATCH against the torch reference:"] + problems))
        sys.exit(1)
    print(f"OK: {len(fetches)} values match the torch reference")


main()
