"""Capture's side of distributed training: graphs split for DDP's gradient buckets."""

from danlu_dynamo.distributed.ddp_split import DDPSplit, active_ddp_module, ddp_split_backend

__all__ = ["DDPSplit", "active_ddp_module", "ddp_split_backend"]
