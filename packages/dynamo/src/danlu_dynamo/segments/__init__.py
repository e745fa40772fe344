"""The segment path: the earlier capture design, kept as the bytecode path's per-frame fallback.

A frame runs as a chain of *segments* (``runner.py``): each starts at a bytecode offset with
a concrete frame state, is traced up to the return or to an instruction it cannot trace, and
is cached per (code object, offset) with its guards; the unsupported instruction runs in
``capture/eager_step.py``, a bytecode stepper on real values, and the next segment starts
after it. It is entered through ``optimize``'s wrapper (``config.capture_path = "segments"``)
or through the C frame hook with a trampoline per code object (``hook_entry.py``).

Why it stays (checked on CPython 3.11.7, torch 2.13):

1. It is the per-frame fallback of the default bytecode path (``bytecode_path.callback``),
   for frames whose transformed code that path cannot emit honestly:

   - a graph break inside a ``with`` block, or with a context manager live at the break
     (``torch.no_grad()``, ``torch.autocast``, ``contextlib.contextmanager`` managers): the
     emitted code would have to rebuild and re-enter the context around the resume function,
     while the stepper here runs the block on real values and tracing resumes after it;
   - values live at the break that the runner cannot rebuild (a bound logger method, a
     ``super()`` object), or that a resume function starts with and the tracer cannot wrap
     (a bound C method such as ``list.append`` below a call in progress);
   - a guard on the frame's own cell objects, a 3.11 break right after a fused
     ``COMPARE_OP``, too many trace restarts, and internal capture errors.

   In the dynamo test suite 21 frames of 16 tests take this fallback (9 breaks inside
   ``with`` blocks, 4 live context managers, 5 loggers or ``super()``, 3 bound C methods);
   ``explain(...).segment_path`` lists them. Without it, such a frame would run as plain
   Python and lose the graphs before and after its break.
2. ``config.capture_path = "segments"`` is a second implementation that tests compare with
   the first: ``test_dynamic_capture.py``, ``test_dynamic_models.py``,
   ``test_dynamic_ints.py``, ``test_capture_static_forward.py`` and
   ``test_recompile_stability.py`` run on both paths, ``test_capture_hook.py`` runs a quarter
   of the program suite through it entered by the hook (``config.use_frame_hook``), and
   ``benchmarks/dynamo_overhead.py`` times it against the bytecode path.

Removing it needs the bytecode path to emit the cases in 1 (or to accept running those
frames as plain Python) and the tests in 2 to drop their second path.

Imports go one way: ``bytecode_path`` and ``optimizer`` import this package; it imports
``capture_context``, ``capture``, ``bytecode`` and ``eval_frame``, never the bytecode path.
"""
