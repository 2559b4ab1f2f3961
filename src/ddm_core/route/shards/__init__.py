"""Which shards a statement reaches: from its parsed tree to data nodes.

* :mod:`.analyze` — the logic tables of each scope, their aliases and kinds.
* :mod:`.conditions` — WHERE / JOIN ... ON predicates on sharding columns, in disjunctive
  normal form; :mod:`.derived` reads a derived table's from the enclosing WHERE;
  :mod:`.coerce` compares strings with integer shard columns as the server does.
* :mod:`.targets` — conditions → data nodes of one sharded table (its algorithms);
  :mod:`.fast` — the same for ``WHERE key = ?`` without the general machinery.
* :mod:`.colocation` — which sharded tables of a join provably share a node, and where
  the statement's units run.
"""
