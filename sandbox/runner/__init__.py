"""The program that runs inside every sandbox container (standard library only).

It is copied into each image at /opt/sandbox/runner and started as
``python3 -m runner``; see ``__main__`` for the protocol.
"""
