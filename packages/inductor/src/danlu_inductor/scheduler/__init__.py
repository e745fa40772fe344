"""Scheduling: dependencies between IR nodes, fusion into kernels, memory planning."""

from danlu_inductor.scheduler.scheduler import Scheduler

__all__ = ["Scheduler"]
