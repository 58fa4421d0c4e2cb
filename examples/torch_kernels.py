"""A plain PyTorch script, no IKET annotation: the kernels a model step launches.

Elementwise kernels (``x * 2 + 1``, ``relu``), a row reduction (``sum``), a cuBLAS GEMM
(``a @ b``) and a softmax, a few steps each. Capture it with ``--warp-trace``: every launch,
its grid, block, SMs and warp lifetimes, and no kernel of it needs instrumenting::

    iket profile --warp-trace -o iket-torch -- python3 examples/torch_kernels.py
"""

import torch

STEPS = 4
N = 2048


def main() -> None:
    torch.manual_seed(0)
    a = torch.randn(N, N, device="cuda")
    b = torch.randn(N, N, device="cuda")
    for _ in range(STEPS):
        x = a * 2 + 1  # elementwise
        y = torch.relu(x)  # elementwise
        rows = y.sum(dim=1)  # reduction
        c = y @ b  # cuBLAS GEMM
        p = torch.softmax(c, dim=1)  # softmax
    torch.cuda.synchronize()
    expect = torch.relu(a.cpu() * 2 + 1)
    assert torch.allclose(rows.cpu(), expect.sum(dim=1), rtol=1e-3, atol=1e-1)
    assert torch.allclose(p.sum(dim=1).cpu(), torch.ones(N), atol=1e-3)
    print(f"torch_kernels ok: {STEPS} steps of elementwise, reduction, GEMM and softmax")


if __name__ == "__main__":
    main()
