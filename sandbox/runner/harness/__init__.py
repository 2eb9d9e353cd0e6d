"""Programs that judge candidate code inside the container (standard library; pytest optional).

A judge program runs as the judge uid with the hidden tests; the candidate's
code runs in a separate process as the sandbox uid (``candidate.py``) and is
reached through a socket, so the tests see only plain values (``wire.py``)
and the candidate never sees the tests nor touches the code that decides.
Each module here is also a script, started through the runner's fast path.

Agent tasks (``sandbox.evals``) are judged differently, since a whole workspace
is judged: ``workspace_copy.py`` copies it for the judge (exec bits kept, no
link leading out of the copy) and ``pytest_channel.py`` runs the hidden pytest
files with the platform's own plugin, whose report reaches the runner on a
channel the code under test cannot forge from outside the test process.
"""
