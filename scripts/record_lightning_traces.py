"""Record torch.profiler traces with PyTorch Lightning's PyTorchProfiler: a tiny MLP on random
data, CPU, 2 ranks (DDP over gloo), 8 steps, schedule wait=1 warmup=1 active=3.

    python scripts/record_lightning_traces.py OUT_DIR [STEPS [val]]   (LT_DEVICES=1: one process)

Needs lightning (2.6.6 recorded tests/data/traces/lightning*), which clusterbench does not
depend on: a virtual environment with --system-site-packages keeps the installed torch."""

import os
import sys

import lightning.pytorch as pl
import torch
from lightning.pytorch.profilers import PyTorchProfiler
from torch.utils.data import DataLoader, TensorDataset

OUT = sys.argv[1] if len(sys.argv) > 1 else "lightning-traces"
# optional: more steps (the schedule repeats: one trace file per rank and cycle) and a
# validation loop at step 8, to see what analyze makes of several files per rank
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 8
VALIDATE = len(sys.argv) > 3 and sys.argv[3] == "val"
DEVICES = int(os.environ.get("LT_DEVICES", "2"))  # 1: one process, no DDP, no process group


class MLP(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(256, 512),
            torch.nn.ReLU(),
            torch.nn.Linear(512, 512),
            torch.nn.ReLU(),
            torch.nn.Linear(512, 10),
        )

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.cross_entropy(self.net(x), y), sync_dist=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


def main() -> None:
    torch.manual_seed(0)
    data = TensorDataset(torch.randn(1024, 256), torch.randint(0, 10, (1024,)))
    profiler = PyTorchProfiler(
        dirpath=OUT,
        filename="prof",
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=3),
        export_to_chrome=True,
    )
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=DEVICES,
        strategy="ddp" if DEVICES > 1 else "auto",
        max_steps=STEPS,
        profiler=profiler,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        limit_val_batches=4 if VALIDATE else 0,
        val_check_interval=8 if VALIDATE else None,
        num_sanity_val_steps=0,
    )
    val = DataLoader(data, batch_size=32) if VALIDATE else None
    trainer.fit(MLP(), DataLoader(data, batch_size=32), val)


if __name__ == "__main__":
    main()
