"""Record torch.profiler traces of a Hugging Face Trainer job: a 2-layer BERT (hidden 64) built
from its config (no download) on random tokens, CPU, 2 processes under torchrun (DDP over gloo),
profiled by the common recipe: a TrainerCallback that calls prof.step() in on_step_end, a
schedule, and tensorboard_trace_handler.

    torchrun --nproc-per-node 2 scripts/record_hf_trainer_traces.py OUT_DIR \
        [lean] [gz] [layers=N] [active=N] [dropout=P]

"lean": no record_shapes / profile_memory / with_stack (smaller files); without it the
recipe's usual options are on.  "gz": tensorboard_trace_handler(..., use_gzip=True).
tests/data/traces/hf-trainer: "lean gz layers=1 active=3 dropout=0", transformers 5.25.0 and
accelerate 1.16.0 (not clusterbench dependencies: a virtual environment with
--system-site-packages keeps the installed torch)."""

import sys

import torch
from transformers import (
    BertConfig,
    BertForSequenceClassification,
    Trainer,
    TrainerCallback,
    TrainingArguments,
)

OUT = sys.argv[1] if len(sys.argv) > 1 else "hf-traces"
LEAN = "lean" in sys.argv[2:]
GZIP = "gz" in sys.argv[2:]
OPTS = dict(a.split("=", 1) for a in sys.argv[2:] if "=" in a)
LAYERS = int(OPTS.get("layers", 2))
ACTIVE = int(OPTS.get("active", 3))
DROPOUT = float(OPTS.get("dropout", 0.1))


class RandomTokens(torch.utils.data.Dataset):
    def __init__(self, n: int = 512, seq: int = 32, vocab: int = 1000) -> None:
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, vocab, (n, seq), generator=g)
        self.labels = torch.randint(0, 2, (n,), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {
            "input_ids": self.ids[i],
            "attention_mask": torch.ones_like(self.ids[i]),
            "labels": self.labels[i],
        }


class ProfCallback(TrainerCallback):
    def __init__(self, prof: torch.profiler.profile) -> None:
        self.prof = prof

    def on_step_end(self, args, state, control, **kwargs):
        self.prof.step()


def main() -> None:
    config = BertConfig(
        vocab_size=1000,
        hidden_size=64,
        num_hidden_layers=LAYERS,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=64,
        num_labels=2,
        hidden_dropout_prob=DROPOUT,
        attention_probs_dropout_prob=DROPOUT,
    )
    model = BertForSequenceClassification(config)
    args = TrainingArguments(
        output_dir=f"{OUT}/trainer-out",
        per_device_train_batch_size=16,
        max_steps=8,
        use_cpu=True,
        ddp_backend="gloo",
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        dataloader_num_workers=0,
        disable_tqdm=True,
        seed=0,
    )
    trainer = Trainer(model=model, args=args, train_dataset=RandomTokens())
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(wait=1, warmup=1, active=ACTIVE, repeat=1),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(f"{OUT}/traces", use_gzip=GZIP),
        record_shapes=not LEAN,
        profile_memory=not LEAN,
        with_stack=not LEAN,
    ) as prof:
        trainer.add_callback(ProfCallback(prof))
        trainer.train()
    # without it, a rank may abort at exit ("terminate called without an active exception")
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main()
