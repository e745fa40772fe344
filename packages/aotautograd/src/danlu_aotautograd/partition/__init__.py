"""Partitioners: split a joint graph into a forward and a backward graph."""

from danlu_aotautograd.partition.default import default_partition
from danlu_aotautograd.partition.graph_split import Partition, extract_graph, node_bytes
from danlu_aotautograd.partition.min_cut import min_cut_partition

__all__ = ["Partition", "default_partition", "extract_graph", "min_cut_partition", "node_bytes"]
