"""INSERT and REPLACE: rows split per node, keys generated.

* :mod:`.insert` — the compiled statement (:class:`~.insert.InsertStatement`) and the key
  generators.
* :mod:`.insert_fast` — the one-row INSERT routed by its values without batch routing.
* :mod:`.insert_forms` — ``INSERT ... SET`` rewritten to the column-list form.
* :mod:`.insert_select` — ``INSERT ... SELECT``: when each node may copy its own rows.
"""
