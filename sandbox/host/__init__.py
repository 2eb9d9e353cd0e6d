"""This machine: its Docker engine, the sandbox images, and the processes around a service.

:mod:`.engine` (installs and starts dockerd with the gVisor runtimes), :mod:`.images`
(builds the images locally from a debootstrap base), :mod:`.labels` (which containers
are whose), :mod:`.reaper` (removes a dead service's containers), :mod:`.launcher`
(starts a service and waits until it answers). Below ``backends``; needs only ``errors``.
"""
