"""SELECT, UPDATE and DELETE: statements routed by the shard conditions of their scopes.

* :mod:`.query` — the compiled statement (:class:`~.query.QueryStatement`).
* :mod:`.select_rewrite` — a SELECT that reaches several shards rewritten for its units,
  and the merge spec that finishes it.
"""
