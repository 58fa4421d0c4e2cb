"""A bf16 Transformer training step that calls an instrumented kernel between its layers.

A few ``nn.TransformerEncoderLayer``s under bf16 autocast, AdamW, STEPS steps. Between two
layers the forward hands its activations (float32, detached) to ``affine`` — the TIRx kernel
of ``model_tirx_kernel`` (default) or, with ``KERNEL=cute``, the CuTe DSL kernel of
``model_cute_kernel`` — and adds the mean of the result as a constant: the kernel's output is
used, and autograd never sees it.

run-iket 4.8.1 aborts on the half-precision cuBLAS GEMMs of such a step (docs/faults.md),
so a plain ``iket profile examples/model_step.py`` fails. Record the kernel's call in a plain
run and capture only that call instead::

    iket profile examples/model_step.py --extract model_tirx_kernel:affine -o iket-model
    iket profile examples/model_step.py --extract model_tirx_kernel:affine --calls 3 -o iket-model-3
    iket profile --replay iket-model -o iket-model-again
"""

import os

import torch
from torch import nn

if os.environ.get("KERNEL", "tirx") == "cute":
    from model_cute_kernel import N, affine
else:
    from model_tirx_kernel import N, affine

LAYERS, D_MODEL, HEADS = 3, 256, 4
BATCH, SEQ = N // (64 * D_MODEL), 64  # the activations between two layers: N elements
STEPS = int(os.environ.get("STEPS", "3"))


class Model(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(D_MODEL, HEADS, 4 * D_MODEL, batch_first=True) for _ in range(LAYERS)
        )
        self.head = nn.Linear(D_MODEL, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for index, layer in enumerate(self.layers):
            x = layer(x)
            if index < LAYERS - 1:  # the instrumented kernel, between layers
                shifted = affine(x.detach().float().reshape(-1).contiguous())
                x = x + shifted.mean().to(x.dtype) * 1e-3
        return self.head(x).mean()


def main() -> None:
    torch.manual_seed(0)
    model = Model().cuda()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    data = torch.randn(STEPS, BATCH, SEQ, D_MODEL, device="cuda")
    for step in range(STEPS):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(data[step])
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"model_step: step {step} loss {loss.item():.4f}", flush=True)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
