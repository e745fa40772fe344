"""The loop-level IR: symbolic indices, the ``ops`` set, buffers, layouts, loops and views."""
