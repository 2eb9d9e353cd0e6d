"""Many sandbox hosts behind one API on a Ray cluster: host agents, the router, scheduling.

The scheduling modules (:mod:`.config`, :mod:`.scheduler`, :mod:`.placement`,
:mod:`.warm`) are pure code: they import neither Ray nor Docker. Importing this
package imports no Ray; :class:`Fleet` (the handle for trainers running in the
cluster) loads it on first use.
"""

from __future__ import annotations

from typing import Any

__all__ = ["Fleet"]


def __getattr__(name: str) -> Any:
    if name == "Fleet":
        from sandbox.fleet.handle import Fleet

        return Fleet
    raise AttributeError(name)
