# multi_kernel.py as a torchrun job: each rank runs the same two kernels on its own GPU
# (LOCAL_RANK modulo the GPUs visible, so two ranks share one GPU on a one-GPU machine).
# No collective is needed, so no process group (and no NCCL) is started.
import os

import torch

import multi_kernel


def main():
    rank, local_rank = int(os.environ.get("RANK", "0")), int(os.environ.get("LOCAL_RANK", "0"))
    torch.cuda.set_device(local_rank % torch.cuda.device_count())
    multi_kernel.workload()
    print(f"rank {rank} ok on cuda:{torch.cuda.current_device()}")


if __name__ == "__main__":
    main()
