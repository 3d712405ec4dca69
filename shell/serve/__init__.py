"""``treestore serve``: the stores as an HTTP query service (see ``docs/serve.md``).

Lives here: ``options`` (``ServeOptions``, the defaults), ``command`` (the command's
work: refusals, the one line, uvicorn, the graceful stop), ``stores`` (the served stores
at their newest versions, Spark started in the background), ``app`` (routes, the token
check, CORS, the page's files, health, metrics), ``query_route`` (``/query``: fields,
cache, conditional requests, slots, the stream), ``running`` (a query's thread and its
bounded buffer), ``encoders`` (rows as json, jsonl, csv, tsv, Arrow), ``answers``
(errors as JSON with their status), ``cache``, ``metrics``, ``openapi``,
``catalog_routes`` (the browse and help calls over HTTP) and ``catalog`` (what they
answer, as plain documents: pure functions, no HTTP). The page's files are in ``page/``.

May import: ``shell.output``, ``shell.repl``, ``query.driver``, ``query.ops``,
``treestore``, ``treestore.storage``, ``treestore.store``.
"""

__all__: list[str] = []
