"""Capture settings."""

# Enter capture through the C frame hook (``eval_frame``) instead of only through the
# ``optimize`` wrapper: then user frames started by library code inside a compiled call
# (module hooks, autograd Functions, callbacks) are captured too. Off by default while the
# hook path gets more mileage; the test suite runs both.
import os as _os

use_frame_hook = _os.environ.get("DANLU_DYNAMO_FRAME_HOOK", "0") == "1"
