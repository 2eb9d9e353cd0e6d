"""Programs that judge candidate code inside the container (standard library; pytest optional).

A judge program runs as the judge uid with the hidden tests; the candidate's
code runs in a separate process as the sandbox uid (``candidate.py``) and is
reached through a socket, so the tests see only plain values (``wire.py``)
and the candidate never sees the tests nor touches the code that decides.
Each module here is also a script, started through the runner's fast path.
"""
