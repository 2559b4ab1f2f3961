"""DDL, SHOW and DESCRIBE: statements routed by the tables they name, not by conditions.

* :mod:`.ddl` — the compiled statement for DDL and the other unconditioned statements.
* :mod:`.ddl_names` — constraint names made unique per physical table.
* :mod:`.show_tables` — the logical ``SHOW TABLES``, answered with logic table names.
"""
