"""Capture settings."""

import os as _os

# How optimize() runs a frame:
# - "bytecode" (default): the C frame hook sees the frame; on a miss the frame is traced and the
#   hook caches transformed bytecode (compiled graph + resume functions at graph breaks) guarded
#   by one generated check function (``bytecode_path.py``). Frames it cannot emit fall back to
#   the segment path, per frame.
# - "segments": the earlier design: a Python wrapper enters capture, a frame runs as a chain of
#   segments with a bytecode stepper between them, guards in capture's per-offset cache
#   (``segments/``, whose docstring says why it stays).
capture_path = _os.environ.get("DANLU_DYNAMO_CAPTURE_PATH", "bytecode")

# Graphs compiled for one code object in one optimize() context (bytecode path), or for one
# bytecode offset of a frame (segment path), before it runs eagerly; `danlu.config` sets it.
recompile_limit = 8

# Segment path only: enter capture through the C frame hook (a trampoline per code object)
# instead of only through the optimize wrapper.
use_frame_hook = _os.environ.get("DANLU_DYNAMO_FRAME_HOOK", "0") == "1"

# Graphs captured inside a DistributedDataParallel forward are compiled in pieces at its
# gradient buckets, so each bucket's all-reduce can overlap the rest of the backward
# (``distributed/ddp_split.py``). Off: one piece per graph (all gradients at the end).
ddp_split = _os.environ.get("DANLU_DDP_SPLIT", "1") != "0"
