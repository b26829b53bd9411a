"""The local web viewer behind ``sessiontree serve`` (the ``sessiontree[web]`` extra: Starlette and uvicorn).

``sessions.py`` keeps the repository's open sessions, ``rows.py`` lays a tree out as rows for a virtualised view,
``payloads.py`` builds the JSON every page and endpoint serves, ``api.py`` and ``pages.py`` are the routes,
``auth.py`` the token gate, ``server.py`` binds and runs. Nothing outside ``sessiontree serve`` imports this package.
"""
