"""The domain: messages, entry events, the session aggregate and its errors.

Nothing here does I/O or imports a serialiser; the public names are re-exported by the ``sessiontree`` package."""
