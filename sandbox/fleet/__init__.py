"""Many sandbox hosts behind one API: the fleet's config, scheduler, placement and warm sizing.

The scheduling modules (:mod:`.config`, :mod:`.scheduler`, :mod:`.placement`,
:mod:`.warm`) are pure code: they import neither Ray nor Docker.
"""
