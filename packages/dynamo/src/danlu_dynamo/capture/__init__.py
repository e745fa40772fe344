"""Graph capture: a symbolic interpreter for CPython 3.11/3.12 bytecode that records torch calls
into FX graphs, with guards, side effects and graph breaks."""
