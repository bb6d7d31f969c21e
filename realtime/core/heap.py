"""The garbage collector kept off the frame path.

A full collection holds the GIL for as long as it takes to scan every tracked object: tens of ms
once the models, PyAV and aiortc are loaded (docs/PERFORMANCE.md, figures behind the code),
which stalls capture, the face stages and the network alike for up to three frame periods.
Frozen objects are left out of every later scan, so a collection then costs only what was made
since. Freezing is done once per process, when what lives for the whole run is loaded: frozen
cyclic garbage is never freed, so freezing again for each new stream would keep each one's.
"""

from __future__ import annotations

import gc


def freeze_heap(*, collect: bool = True) -> bool:
    """Freeze every object alive now (after a full collection when `collect`), unless this
    process froze its heap already. True when it froze it now."""
    if gc.get_freeze_count() > 0:
        return False
    if collect:
        gc.collect()
    gc.freeze()
    return True


__all__ = ["freeze_heap"]
