"""Markers shared by the interpreter, the runtime and the eager stepper."""


class _Null:
    def __repr__(self):
        return "<NULL>"


NULL = _Null()  # CPython's NULL stack entry, carried across graph breaks
